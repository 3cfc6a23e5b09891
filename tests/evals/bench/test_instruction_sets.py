from cardrag.evals.bench.instruction_sets import isa_table


def _growth(cards: int, ours: float, floor: float) -> dict[str, object]:
    return {"cards": cards, "chars": 1000, "p50_ms": {"ours": ours, "floor": floor}}


def test_each_instruction_set_is_a_column_of_ours_against_the_floor() -> None:
    by_isa = {
        "AVX2": {
            "latency": [
                {"system": "floor: embed + 1 Chroma query", "ratio": 1.0},
                {"system": "ours (shipped settings)", "ratio": 1.05},
            ],
            "growth": [_growth(1000, 6.0, 3.0)],
            "lengths": [_growth(100, 4.5, 3.0)],
        },
        "AVX-512": {"growth": [_growth(1000, 5.0, 4.0), _growth(10000, 7.0, 2.0)]},
    }
    table = isa_table(by_isa)
    assert table[3:] == [
        "| measurement | AVX-512 | AVX2 |",
        "|---|---|---|",
        "| 38 cards |  | 1.05x |",
        "| growth 1,000 cards | 1.25x | 2.0x |",
        "| growth 10,000 cards | 3.5x |  |",
        "| lengths 100 x 1,000 chars |  | 1.5x |",
    ]
    assert isa_table({}) == []
