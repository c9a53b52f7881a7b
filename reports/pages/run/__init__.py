"""The run page and what only it shows: its sections, one per question, section 4b's model against the run, and
each section's one-sentence takeaway (the answer, the evidence and the alerts it shares with the other pages)."""
