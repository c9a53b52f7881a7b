"""The what-if page of a run on a cluster it did not run on: the page with its step-time sections (`page`) and
its memory sections, where the fit and the choice are said (`memory`)."""
