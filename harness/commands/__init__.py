"""The face's commands: one module per `ddpbench` subcommand, each with a `run(args, *, command)`;
`console` prints every line the user sees."""
