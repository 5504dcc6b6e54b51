"""One outbox under the channels (webhooks, Slack, email): the events after a channel's cursor
become its delivery rows (`fanout`), and each row is claimed with a lease, sent by the channel's
transport, logged and retried on a schedule (`outbox`). A channel says only which events make
which deliveries and how one is sent."""
