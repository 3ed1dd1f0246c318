package cluster

import (
	"bufio"
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
	"time"

	"golang.org/x/sys/unix"

	"github.com/sessionflow/sessionflow/internal/devserver"
)

// ServerVersion is the Temporal server release the tools/ module pins: the
// one the Temporal CLI's dev server is built from, the one the compose stack
// runs (temporalio/server), and the one the launcher builds.
const ServerVersion = "v1.29.1"

// toolsModule is the module path of the nested tools/ module.
const toolsModule = "github.com/sessionflow/sessionflow/tools"

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
	if isExecutable(bin) {
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
	if progress == nil {
		progress = io.Discard
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", fmt.Errorf("creating the cache directory: %w", err)
	}
	lockPath := bin + ".lock"
	lf, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("opening the build lock: %w", err)
	}
	defer lf.Close()
	for waited := false; ; waited = true {
		err := unix.Flock(int(lf.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return "", fmt.Errorf("locking %s: %w", lockPath, err)
		}
		if !waited {
			fmt.Fprintf(progress, "waiting for another process that is building %s (lock %s)…\n", t.Name, lockPath)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for the build lock of %s: %w", t.Name, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
	defer func() { _ = unix.Flock(int(lf.Fd()), unix.LOCK_UN) }()
	if isExecutable(bin) {
		return bin, nil
	}
	tmp := bin + ".tmp"
	_ = os.Remove(tmp)
	fmt.Fprintf(progress, "building %s %s from tools/ (first run only; several minutes on 2 cores)…\n", t.Name, ServerVersion)
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, t.Package)
	cmd.Dir = tools
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("go build %s in %s: %w\n%s", t.Package, tools, err, tail(out.Bytes(), 4096))
	}
	if err := os.Rename(tmp, bin); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("installing %s: %w", bin, err)
	}
	fmt.Fprintf(progress, "built %s in %s: %s\n", t.Name, time.Since(start).Round(time.Second), bin)
	return bin, nil
}

// toolsDir finds the tools/ module of the sessionflow checkout, walking up
// from workDir (default the working directory) and then from this package's
// source directory.
func toolsDir(workDir string) (string, error) {
	var starts []string
	if workDir == "" {
		if wd, err := os.Getwd(); err == nil {
			workDir = wd
		}
	}
	starts = append(starts, workDir)
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		if dir == "" {
			continue
		}
		for dir = filepath.Clean(dir); ; dir = filepath.Dir(dir) {
			if modulePath(filepath.Join(dir, "tools", "go.mod")) == toolsModule {
				return filepath.Join(dir, "tools"), nil
			}
			if filepath.Dir(dir) == dir {
				break
			}
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

// modulePath returns the module path a go.mod declares, "" when it cannot
// be read.
func modulePath(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// tail returns at most n trailing bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
