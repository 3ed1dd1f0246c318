package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/sessionflow/sessionflow/internal/app/devserver"
	"github.com/sessionflow/sessionflow/internal/app/toolbuild"
)

// ServerVersion is the Temporal server release the tools/ module pins: the
// one the Temporal CLI's dev server is built from, the one the compose stack
// runs (temporalio/server), and the one the launcher builds.
const ServerVersion = "v1.29.1"

// Tool is a binary of the tools/ module the launcher builds once and caches.
type Tool struct {
	// Name is the binary's name in the cache directory, before the version.
	Name string
	// Package is the main package in the tools/ module.
	Package string
	// Env is the environment variable that names a binary to use instead.
	Env string
}

// The server binaries of the cluster.
var (
	// ServerTool is the Temporal server (all services in one process).
	ServerTool = Tool{Name: "temporal-server", Package: "go.temporal.io/server/cmd/server", Env: "TEMPORAL_SERVER"}
	// SQLTool is the schema tool of the SQL persistence (temporal-sql-tool).
	SQLTool = Tool{Name: "temporal-sql-tool", Package: "go.temporal.io/server/cmd/tools/sql", Env: "TEMPORAL_SQL_TOOL"}
)

// ErrNoToolsModule is returned when a tool must be built and no sessionflow
// checkout with its tools/ module is found.
var ErrNoToolsModule = errors.New("the sessionflow tools/ module is not found")

// BuildOptions configure Locate.
type BuildOptions struct {
	// CacheDir holds the built binaries; default devserver.DefaultCacheDir
	// (the directory of the dev server's CLI).
	CacheDir string
	// WorkDir is where the search for the sessionflow checkout starts;
	// default the working directory, then this package's source directory.
	WorkDir string
	// Progress receives progress messages of a build; nil discards them.
	Progress io.Writer
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
}

// Locate returns the binary of t: the path its environment variable names,
// else <cache>/<name>-<ServerVersion>, built there from the tools/ module
// when missing. Concurrent callers, in this process or others, build at
// most once: the build runs under a file lock in the cache directory, and
// the cache is checked again once the lock is held.
func Locate(ctx context.Context, t Tool, opts BuildOptions) (string, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if v := getenv(t.Env); v != "" {
		p, err := exec.LookPath(v)
		if err != nil {
			return "", fmt.Errorf("%s=%q: %w", t.Env, v, err)
		}
		return filepath.Abs(p)
	}
	dir := opts.CacheDir
	if dir == "" {
		var err error
		if dir, err = devserver.DefaultCacheDir(); err != nil {
			return "", err
		}
	}
	bin := filepath.Join(dir, t.Name+"-"+ServerVersion)
	if toolbuild.IsExecutable(bin) {
		return bin, nil
	}
	tools, err := toolsDir(opts.WorkDir)
	if err != nil {
		return "", fmt.Errorf("%s is not built (%s): %w", t.Name, bin, err)
	}
	return buildLocked(ctx, t, tools, bin, opts.Progress)
}

// buildLocked builds t into bin under the cache directory's lock.
func buildLocked(ctx context.Context, t Tool, tools, bin string, progress io.Writer) (string, error) {
	b := &toolbuild.Build{
		Bin: bin,
		Dir: tools,
		Run: func(ctx context.Context, dir, out string) error {
			return toolbuild.GoBuild(ctx, dir, out, t.Package)
		},
		Progress:  progress,
		PollEvery: 250 * time.Millisecond,
		Texts: toolbuild.Texts{
			CacheDir: "the cache directory",
			OpenLock: "the build lock",
			WaitLock: "the build lock of " + t.Name,
			Waiting:  "waiting for another process that is building " + t.Name + " (lock %s)…",
			Building: fmt.Sprintf("building %s %s from tools/ (first run only; several minutes on 2 cores)…", t.Name, ServerVersion),
			Built:    "built " + t.Name + " in %s: %s",
			BuildFailed: func(err error) error {
				return fmt.Errorf("building %s in %s: %w", t.Name, tools, err)
			},
			InstallFailed: func(err error) error {
				return fmt.Errorf("installing %s: %w", bin, err)
			},
		},
	}
	return b.Locked(ctx)
}

// toolsDir finds the tools/ module of the sessionflow checkout, walking up
// from workDir (default the working directory) and then from the source
// directory of the toolbuild package.
func toolsDir(workDir string) (string, error) {
	if workDir == "" {
		if wd, err := os.Getwd(); err == nil {
			workDir = wd
		}
	}
	for _, dir := range []string{workDir, toolbuild.SourceDir()} {
		if dir == "" {
			continue
		}
		if root, ok := toolbuild.FindRoot(dir); ok {
			return filepath.Join(root, "tools"), nil
		}
	}
	return "", fmt.Errorf("%w (searched up from %s)", ErrNoToolsModule, workDir)
}

// ModuleDir returns the root of the sessionflow checkout (the directory
// holding go.mod and tools/), searched like the tools/ module.
func ModuleDir(workDir string) (string, error) {
	tools, err := toolsDir(workDir)
	if err != nil {
		return "", err
	}
	return filepath.Dir(tools), nil
}
