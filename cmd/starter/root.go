package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
)

// app carries what every command shares: its streams and its environment.
// Lifecycle commands add their own flags but build on the same app.
type app struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	now    func() time.Time
}

// usageError marks a command line the program cannot act on (unknown command,
// bad flag, missing or malformed flag value). It exits with exitError and a
// pointer to --help.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// noArgs is cobra.NoArgs reporting a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected argument %q for %q", args[0], cmd.CommandPath())
	}
	return nil
}

// groupRunE handles a command group invoked without a valid subcommand.
func groupRunE(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return usageErrorf("%q needs a subcommand", cmd.CommandPath())
}

const rootLong = `starter operates sessionflow session logs.

The lifecycle commands drive sessions through Temporal (a worker must poll the
task queue): create, resume, append, dispose, cancel, describe and list
sessions, start and stop session loops, export workflow histories, and unlock a
session whose owning workflow is gone.

The log group works offline on a store root: it lists, prints, inspects,
creates, appends to, repairs, unlocks and deletes session logs without
Temporal. Commands that take write access hold the session's write lease only
for their own duration.

Exit status: 0 on success, 1 on any error, including a usage error (unknown
command or flag, missing or malformed flag value). The error is printed on
stderr as "starter: <error>".`

// newRootCmd builds the command tree over the given streams.
func newRootCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv, now: time.Now}
	root := &cobra.Command{
		Use:           "starter",
		Short:         "Operate sessionflow session logs",
		Long:          rootLong,
		Args:          cobra.ArbitraryArgs,
		RunE:          groupRunE,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })
	root.AddCommand(newLifecycleCmds(a)...)
	root.AddCommand(newLogCmd(a))
	return root
}

// runContext is run under a context that cancels the command (main cancels
// it on SIGINT and SIGTERM).
func runContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd(stdin, stdout, stderr)
	if args == nil {
		args = []string{} // cobra falls back to os.Args for nil
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "starter: %s\n", errorText(err))
	var ue *usageError
	if errors.As(err, &ue) {
		if cmd == nil {
			cmd = root
		}
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return exitError
	}
	return exitError
}
