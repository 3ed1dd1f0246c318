// Command crashworker is sessionflow's worker (workerapp, with the worker
// command's flags) plus one tool for the crash tests of
// testsuite/integration: slow_count, an idempotent, parallel-safe tool that
// counts its runs in a file of the session's cwd and blocks on its first
// run, so a test can kill the worker while the tool runs and see it run
// again after the restart. It is test infrastructure, never deployed.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 9, the
// tests. It may import any package of the house; nothing imports it.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sessionflow/sessionflow/internal/workerapp"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/tool"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fs, wf := workerapp.NewFlagSet("crashworker")
	if err := fs.Parse(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "crashworker: %v\n", err)
		os.Exit(2)
	}
	cfg, err := wf.Config(os.Environ())
	if err != nil {
		fmt.Fprintf(os.Stderr, "crashworker: %v\n", err)
		os.Exit(2)
	}
	cfg.Agent.Tools = append(cfg.Agent.Tools, slowCount())
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := workerapp.Run(ctx, cfg, logger); err != nil {
		fmt.Fprintf(os.Stderr, "crashworker: %v\n", err)
		os.Exit(1)
	}
}

// slowCountArgs are slow_count's arguments: the counter file (in the cwd)
// and how long the first run blocks.
type slowCountArgs struct {
	Name       string `json:"name"`
	FirstRunMs int64  `json:"firstRunMs"`
}

// slowCount appends a line to <cwd>/<name>.runs, blocks firstRunMs when it
// is the first line, and returns "run N".
func slowCount() tool.Tool {
	return tool.Tool{
		Name:        "slow_count",
		Description: "Counts its runs in <name>.runs in the working directory; its first run blocks firstRunMs milliseconds.",
		Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","minLength":1},` +
			`"firstRunMs":{"type":"integer","minimum":0}},"required":["name"],"additionalProperties":false}`),
		Parallel:   true,
		Idempotent: true,
		Run: func(ctx context.Context, call tool.Call) (tool.Result, error) {
			var a slowCountArgs
			if err := json.Unmarshal(call.Arguments, &a); err != nil {
				return tool.Result{}, err
			}
			root, err := os.OpenRoot(call.Cwd)
			if err != nil {
				return tool.Result{}, err
			}
			defer root.Close()
			f, err := root.OpenFile(a.Name+".runs", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				return tool.Result{}, err
			}
			_, err = f.WriteString("run\n")
			if err == nil {
				err = f.Sync()
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return tool.Result{}, err
			}
			b, err := root.ReadFile(a.Name + ".runs")
			if err != nil {
				return tool.Result{}, err
			}
			n := strings.Count(string(b), "\n")
			if n == 1 && a.FirstRunMs > 0 {
				select {
				case <-ctx.Done():
					return tool.Result{}, ctx.Err()
				case <-time.After(time.Duration(a.FirstRunMs) * time.Millisecond):
				}
			}
			return tool.Result{Content: []provider.Block{{Type: provider.BlockText, Text: fmt.Sprintf("run %d", n)}}}, nil
		},
	}
}
