"""Arena planning: buffers with overlapping lifetimes never overlap in memory; chains reuse."""

from hypothesis import given, settings
from hypothesis import strategies as st

from edgecnn.runtime.memory import ALIGNMENT, BufferRequest, align, lifetimes, plan_arena


def overlaps(a: BufferRequest, b: BufferRequest) -> bool:
    return a.first <= b.last and b.first <= a.last


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 5000), st.integers(0, 20), st.integers(0, 6)),
        min_size=1,
        max_size=40,
    )
)
def test_live_buffers_never_share_bytes(specs: list[tuple[int, int, int]]) -> None:
    requests = [BufferRequest(i, n, first, first + length) for i, (n, first, length) in enumerate(specs)]
    layout = plan_arena(requests)
    for a in requests:
        assert layout.offsets[a.key] % ALIGNMENT == 0
        assert layout.offsets[a.key] + a.nbytes <= layout.size
        for b in requests:
            if a.key < b.key and overlaps(a, b):
                a0, b0 = layout.offsets[a.key], layout.offsets[b.key]
                assert a0 + align(a.nbytes) <= b0 or b0 + align(b.nbytes) <= a0
    assert layout.size <= layout.naive_size


def test_a_chain_needs_only_two_buffers() -> None:
    # x0 -> x1 -> x2 -> ... each tensor read only by the next step: ping-pong between two buffers
    requests = [BufferRequest(i, 4096, i, i + 1) for i in range(10)]
    layout = plan_arena(requests)
    assert layout.size == 2 * 4096
    assert layout.naive_size == 10 * 4096


def test_lifetimes_pin_requested_tensors_to_the_end() -> None:
    step_inputs = [[0], [1], [2]]
    step_outputs = [[1], [2], [3]]
    spans = lifetimes(step_inputs, step_outputs, pinned={3, 1})
    assert spans == {1: (0, 3), 2: (1, 2), 3: (2, 3)}
