"""How many connections a destination's queue deserves (KumoMTA's `ideal_connection_count`).

One connection per `messages_per_connection` queued messages, rounded up: a short queue is
served by one connection (opening more costs handshakes and looks like abuse to receivers), a
long one by more, up to the destination's limit. Never more connections than messages.
"""


def ideal_connection_count(
    queue_depth: int, *, max_connections: int, messages_per_connection: int = 50
) -> int:
    """Connections wanted for `queue_depth` ready messages: 0 when none, else 1 to the cap."""
    if queue_depth < 0:
        raise ValueError(f"queue_depth must not be negative, got {queue_depth}")
    if max_connections < 1 or messages_per_connection < 1:
        raise ValueError("max_connections and messages_per_connection must be at least 1")
    wanted = -(-queue_depth // messages_per_connection)  # ceiling division
    return min(wanted, max_connections, queue_depth)


def connections_to_open(
    queue_depth: int,
    open_connections: int,
    *,
    max_connections: int,
    messages_per_connection: int = 50,
) -> int:
    """How many connections to add to the `open_connections` a destination has; never negative.

    Surplus connections are not closed here: they finish their message and close when idle.
    """
    ideal = ideal_connection_count(
        queue_depth,
        max_connections=max_connections,
        messages_per_connection=messages_per_connection,
    )
    return max(0, ideal - open_connections)
