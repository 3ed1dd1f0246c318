package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	temporalclient "go.temporal.io/sdk/client"

	"github.com/sessionflow/sessionflow/internal/app/procgroup"
	"github.com/sessionflow/sessionflow/internal/app/readiness"
	"github.com/sessionflow/sessionflow/internal/app/temporalconn"
	"github.com/sessionflow/sessionflow/internal/app/toolbuild"
)

// envWorkerBinary names a built worker binary for the demo.
const envWorkerBinary = "SESSIONFLOW_WORKER_BINARY"

// mainModule is the module path whose ./worker the demo builds.
const mainModule = "github.com/sessionflow/sessionflow"

// errNoWorkerBinary: the demo found no worker binary and no checkout to
// build one from.
var errNoWorkerBinary = errors.New("no worker binary")

// locateWorker returns the worker binary of the demo: the given path, or
// ./worker of the sessionflow checkout (found upward from the working
// directory, then from this file's source directory) built with `go build`
// into dir; the Go build cache makes later builds a link.
func locateWorker(ctx context.Context, given, dir string, progress io.Writer) (string, error) {
	if given != "" {
		p, err := exec.LookPath(given)
		if err != nil {
			return "", fmt.Errorf("worker binary %q: %w", given, err)
		}
		return filepath.Abs(p)
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, s := range starts {
		root, ok := findModuleRoot(s)
		if !ok {
			continue
		}
		out := filepath.Join(dir, "worker")
		fmt.Fprintf(progress, "building the worker: go build ./worker in %s…\n", root)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./worker")
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("go build ./worker: %w\n%s", err, stderr.String())
		}
		return out, nil
	}
	return "", fmt.Errorf("%w: run the demo inside a sessionflow checkout, or pass --worker BIN (or set %s)", errNoWorkerBinary, envWorkerBinary)
}

// findModuleRoot walks up from dir to the directory whose go.mod declares
// the sessionflow module.
func findModuleRoot(dir string) (string, bool) {
	return toolbuild.FindUp(dir, func(d string) bool {
		return toolbuild.DeclaresModule(filepath.Join(d, "go.mod"), mainModule)
	})
}

// workerOutput collects a process's output.
type workerOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *workerOutput) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *workerOutput) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startWorkerProcess starts the worker binary in its own process group with
// args and waits until it polls the task queue under identity.
func startWorkerProcess(ctx context.Context, tc temporalclient.Client, bin, address, namespace, taskQueue, identity string, args []string) (*procgroup.Process, error) {
	full := append([]string{"--" + temporalconn.FlagAddress, address, "--" + temporalconn.FlagNamespace, namespace,
		"--task-queue", taskQueue, "--identity", identity, "--metrics-address", "", "--log-level", "error"}, args...)
	log := &workerOutput{}
	cmd := exec.Command(bin, full...)
	cmd.Env = demoWorkerEnv(os.Environ())
	cmd.Stdout, cmd.Stderr = log, log
	p, err := procgroup.Start(cmd, nil)
	if err != nil {
		return nil, fmt.Errorf("start the worker %s: %w", bin, err)
	}
	err = readiness.Wait(ctx, readiness.Options{
		What:    "worker " + identity,
		Exited:  p.Exited(),
		ExitErr: p.Err,
		Log:     log.String,
	}, readiness.TaskQueuePolled(tc, taskQueue, identity))
	if err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

// demoWorkerEnv is the environment of the demo's workers: the caller's,
// less the Temporal and sessionflow settings (a TEMPORAL_API_KEY would turn
// TLS on against the embedded server, SESSIONFLOW_ANTHROPIC would ask for a
// key): the demo's flags configure them. The model services' variables
// (ANTHROPIC_*, OPENAI_*) pass.
func demoWorkerEnv(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		if strings.HasPrefix(kv, "TEMPORAL_") || strings.HasPrefix(kv, "SESSIONFLOW_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}
