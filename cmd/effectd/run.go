package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

// env reads the process environment; tests pass their own.
type env func(string) string

const usage = `effectd sends external side effects effectively once.

Usage:
  effectd migrate  [--config FILE]             apply the embedded schema to DATABASE_URL; register channels
  effectd serve    [--config FILE] [flags]     run dispatcher, reconciler, pruner and the admin API
  effectd sandbox  [--addr 127.0.0.1:9090]     run the loopback provider emulator
  effectd dev      [--data .data]              throwaway PostgreSQL + sandbox + serve (what make run starts)
  effectd bench    [--scenarios ...]           measure drain, live latency, slow provider, producer cost, memory
  effectd chaos    [--events N] [--faults F]   prove effectively-once under faults (real processes, checker)
  effectd check    [--seed S] [--events N] [--faults F]   the randomized checker: chaos with every actor, invariants judged
  effectd intents  list|show|resolve|retry|cancel|reconcile   operate on intents through the admin API
  effectd channels list|show|pause|resume                      channels through the admin API
  effectd approvals list|show|approve|reject                   two-person approval requests through the admin API
  effectd sweep    --channel C --since T [--until T]           what the provider holds against the table (read-only)
  effectd version                              print the version

Run 'effectd COMMAND --help' for a command's flags.
`

// run is the whole program: main only wires signals and the process.
func run(ctx context.Context, args []string, getenv env, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef("no command given")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "migrate":
		return runMigrate(ctx, rest, getenv, stdout, stderr)
	case "serve":
		return runServe(ctx, rest, getenv, stdout, stderr)
	case "sandbox":
		return runSandbox(ctx, rest, getenv, stdout, stderr)
	case "dev":
		return runDev(ctx, rest, getenv, stdout, stderr)
	case "bench":
		return runBench(ctx, rest, getenv, stdout, stderr)
	case "chaos":
		return runChaos(ctx, rest, getenv, stdout, stderr)
	case "check":
		return runCheck(ctx, rest, stdout)
	case "intents":
		return runIntents(ctx, rest, getenv, stdout, stderr)
	case "approvals":
		return runApprovals(ctx, rest, getenv, stdout, stderr)
	case "channels":
		return runChannels(ctx, rest, getenv, stdout, stderr)
	case "sweep":
		return runSweep(ctx, rest, getenv, stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "effectd", buildVersion())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usagef("unknown command %q", cmd)
}

// parseFlags parses a command's flags; --help prints them and returns errHelp.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fmt.Fprintf(stdout, "Usage of effectd %s:\n", fs.Name())
		fs.PrintDefaults()
		return errHelp
	}
	if err != nil {
		return usagef("%s: %v", fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), strings.Join(fs.Args(), " "))
	}
	return nil
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", ""
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "-dirty"
				}
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			return "devel-" + rev + dirty
		}
		if bi.Main.Version != "" {
			return bi.Main.Version
		}
	}
	return "devel"
}
