"""The column dictionary: every table a run folder holds, each column (name, Arrow type, unit, meaning) declared
once; what a column and a table are (`kinds`), the per-configuration tables (`columns`), the tables beside them
(`model_columns`)."""
