package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/effectd/effectd/api/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	os.Exit(exitCode(err, os.Stderr))
}

// usageError is bad usage: exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// errHelp is --help: the usage was printed, exit 0.
var errHelp = errors.New("help")

func exitCode(err error, stderr io.Writer) int {
	var u usageError
	var apiErr *client.Error
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, &apiErr): // the admin API's answer to the command line
		fmt.Fprintln(stderr, "error:", apiErr)
		return 1
	case errors.As(err, &u):
		fmt.Fprintln(stderr, "effectd:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "effectd:", err)
		return 1
	}
}
