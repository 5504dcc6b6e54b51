"""A real SMTP server for the tests (aiosmtpd on 127.0.0.1) and the messages it received."""

import email
import email.policy
import socket
import threading
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any

from aiosmtpd.controller import Controller


@dataclass(frozen=True)
class Received:
    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage

    @property
    def subject(self) -> str:
        return str(self.message["Subject"])

    @property
    def body(self) -> str:
        return self.message.get_body(preferencelist=("plain",)).get_content()


class Mailbox:
    """aiosmtpd's handler: keeps every message it accepts."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.messages: list[Received] = []
        # Recipients refused at RCPT TO, with the reply given ("550 5.1.1 No such user").
        self.refusing: dict[str, str] = {}

    # aiosmtpd's hook name: a recipient is accepted unless `refusing` names it.
    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: Any
    ) -> str:
        with self.lock:
            refusal = self.refusing.get(address)
        if refusal:
            return refusal
        envelope.rcpt_tos.append(address)
        return "250 OK"

    # aiosmtpd's hook name.
    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        with self.lock:
            self.messages.append(Received(envelope.mail_from, list(envelope.rcpt_tos), message))
        return "250 Message accepted for delivery"

    def to(self, address: str) -> list[Received]:
        with self.lock:
            return [m for m in self.messages if address in m.rcpt_tos]

    def clear(self) -> None:
        with self.lock:
            self.messages.clear()
            self.refusing.clear()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SmtpServer:
    def __init__(self) -> None:
        self.mailbox = Mailbox()
        self.host = "127.0.0.1"
        self.port = free_port()
        self.controller = Controller(self.mailbox, hostname=self.host, port=self.port)

    def start(self) -> None:
        self.controller.start()

    def stop(self) -> None:
        self.controller.stop()

    def settings(self) -> dict[str, Any]:
        """Django's SMTP backend, pointed at this server."""
        return {
            "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "EMAIL_HOST": self.host,
            "EMAIL_PORT": self.port,
        }
