"""Support-suite tests (a package, so test file names may repeat other suites')."""
