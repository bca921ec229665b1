"""The tests are a package (each folder too), so pytest imports every test module under its own dotted name and
the shared helpers import the same way everywhere: `from tests.conftest import ...`, `from tests.fakes import ...`,
`from tests.support.pg_cluster import ...`, `from tests.truth.truth_harness import ...`."""
