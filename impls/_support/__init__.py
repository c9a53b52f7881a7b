"""What several strategies share and what is no strategy of its own: the registry passes over this folder
(its leading underscore), so a file here is never taken for a plug-in, and `impls/` keeps its room for them."""
