// Command starter is the sessionflow command line: offline inspection and
// maintenance of a session store (the log group) and, beside it, the
// lifecycle commands that drive sessions through Temporal.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 8,
// program wiring. It may import any package below the client's row (wire,
// internal/lib/..., session, jsonl, provider, tool, activities, agent,
// workflows) and client, and the other program-wiring packages
// (internal/app/..., bench, deploy); nothing of testsuite.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runContext(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
