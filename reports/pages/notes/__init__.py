"""What the answer and the figures say beside what they rank or draw: the winner's headline, the bounds on the
share of communication hidden, the bars and winners below their floor."""
