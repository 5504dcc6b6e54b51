"""infra.forwarded: the client's address is read from X-Forwarded-For only from a trusted proxy."""

from infra.forwarded import client_address, networks

TRUSTED = networks(["127.0.0.1", "10.0.0.0/8"])


class ClientAddressTestCase:
    def test_it_ignores_the_header_from_an_untrusted_peer(self) -> None:
        assert client_address("203.0.113.9", "198.51.100.1", TRUSTED) == "203.0.113.9"

    def test_it_takes_the_address_the_trusted_proxy_saw(self) -> None:
        assert client_address("127.0.0.1", "198.51.100.1", TRUSTED) == "198.51.100.1"

    def test_it_skips_trusted_proxies_from_the_right_and_ignores_what_the_client_wrote(
        self,
    ) -> None:
        # The client wrote 1.2.3.4 itself; the proxies appended 198.51.100.1 and 10.0.0.5.
        header = "1.2.3.4, 198.51.100.1, 10.0.0.5"
        assert client_address("127.0.0.1", header, TRUSTED) == "198.51.100.1"

    def test_it_keeps_the_peer_when_the_header_is_empty_or_all_trusted(self) -> None:
        assert client_address("127.0.0.1", "", TRUSTED) == "127.0.0.1"
        assert client_address("127.0.0.1", "10.1.1.1", TRUSTED) == "127.0.0.1"
