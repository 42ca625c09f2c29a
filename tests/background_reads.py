"""A read from an iterator on a thread of its own, for tests that end a stream under a waiting
reader (closing a dataset, stopping a server) and check how the read ended."""
import threading


def next_in_background(iterator):
    """Starts `next(iterator)` on a daemon thread; returns (thread, outcome), where outcome gets
    the element, "ended" on StopIteration, or the exception the read raised."""
    outcome = []

    def read_on():
        try:
            outcome.append(next(iterator))
        except StopIteration:
            outcome.append("ended")
        except Exception as e:  # noqa: BLE001 - handed to the test's assertion
            outcome.append(e)

    reader = threading.Thread(target=read_on, daemon=True)
    reader.start()
    return reader, outcome
