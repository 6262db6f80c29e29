"""Input files shared by the suites' loaders."""
