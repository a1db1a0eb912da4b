import GQLMuxCtlCommand

await GQLMuxCtlEntry.main(Array(CommandLine.arguments.dropFirst()))
