package devserver

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/internal/app/toolbuild"
)

// env returns a Getenv over a fixed map.
func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

// noPath is a PATH lookup that finds nothing but absolute or relative paths.
func noPath(name string) (string, error) {
	if strings.ContainsRune(name, filepath.Separator) {
		return exec.LookPath(name)
	}
	return "", exec.ErrNotFound
}

// testLocator returns a locator over cacheDir with a PATH that finds nothing
// and a build that fails the test if called.
func testLocator(t *testing.T, cacheDir string) *locator {
	t.Helper()
	l := newLocator(LocateOptions{CacheDir: cacheDir, Getenv: env(nil)})
	l.lookPath = noPath
	l.build = func(context.Context, string, string) error {
		t.Error("unexpected build")
		return errors.New("unexpected build")
	}
	l.pollEvery = time.Millisecond
	return l
}

// writeExecutable writes an executable file with the given content.
func writeExecutable(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o755))
}

// fakeBuild writes an executable to out and counts its calls.
func fakeBuild(calls *atomic.Int32, before func()) func(context.Context, string, string) error {
	return func(_ context.Context, toolsDir, out string) error {
		calls.Add(1)
		if before != nil {
			before()
		}
		if _, err := os.Stat(filepath.Join(toolsDir, "go.mod")); err != nil {
			return err
		}
		return os.WriteFile(out, []byte("#!/bin/sh\necho 'temporal version 1.5.1'\n"), 0o755)
	}
}

func TestLocateTakesTEMPORAL_CLI(t *testing.T) {
	l := testLocator(t, t.TempDir())
	l.getenv = env(map[string]string{"TEMPORAL_CLI": cliPath})
	got, err := l.locate(context.Background())
	require.NoError(t, err)
	assert.Equal(t, cliPath, got)
}

func TestLocateRejectsMissingTEMPORAL_CLI(t *testing.T) {
	l := testLocator(t, t.TempDir())
	missing := filepath.Join(t.TempDir(), "temporal")
	l.getenv = env(map[string]string{"TEMPORAL_CLI": missing})
	_, err := l.locate(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "TEMPORAL_CLI=")
	assert.Contains(t, err.Error(), missing)
}

func TestLocateTakesCachedBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, binaryName())
	writeExecutable(t, bin, "#!/bin/sh\n")
	got, err := testLocator(t, dir).locate(context.Background())
	require.NoError(t, err)
	assert.Equal(t, bin, got)
}

func TestLocateCacheDirFollowsXDG(t *testing.T) {
	xdg := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(xdg, "sessionflow"), 0o755))
	bin := filepath.Join(xdg, "sessionflow", binaryName())
	writeExecutable(t, bin, "#!/bin/sh\n")
	l := testLocator(t, "")
	l.getenv = env(map[string]string{"XDG_CACHE_HOME": xdg})
	got, err := l.locate(context.Background())
	require.NoError(t, err)
	assert.Equal(t, bin, got)
}

func TestLocatePathVersionGate(t *testing.T) {
	cases := []struct {
		output string
		ok     bool
	}{
		{"temporal version 1.4.2 (Server 1.28.0, UI 2.40.0)", false},
		{"temporal version 0.0.0-DEV (Server 1.29.1, UI 2.42.1)", false},
		{"temporal version 1.5.0 (Server 1.29.0, UI 2.42.0)", true},
		{"temporal version 1.6.3 (Server 1.30.0, UI 2.43.0)", true},
		{"temporal version 2.0.0", true},
		{"something else", false},
	}
	for _, c := range cases {
		t.Run(c.output, func(t *testing.T) {
			script := filepath.Join(t.TempDir(), "temporal")
			writeExecutable(t, script, "#!/bin/sh\necho '"+c.output+"'\n")
			var progress bytes.Buffer
			l := testLocator(t, t.TempDir())
			l.opts.NoBuild = true
			l.opts.Progress = &progress
			l.lookPath = func(name string) (string, error) {
				if name == "temporal" {
					return script, nil
				}
				return noPath(name)
			}
			got, err := l.locate(context.Background())
			if c.ok {
				require.NoError(t, err)
				assert.Equal(t, script, got)
				return
			}
			require.ErrorIs(t, err, ErrCLINotFound)
			assert.Contains(t, progress.String(), "ignoring "+script)
		})
	}
}

func TestParseCLIVersion(t *testing.T) {
	v, err := parseCLIVersion("temporal version 1.5.1 (Server 1.29.1, UI 2.42.1)\n")
	require.NoError(t, err)
	assert.Equal(t, semver{1, 5, 1}, v)
	assert.True(t, v.atLeast(1, 5))
	assert.False(t, semver{1, 4, 9}.atLeast(1, 5))
	assert.True(t, semver{2, 0, 0}.atLeast(1, 5))
	_, err = parseCLIVersion("temporal: command not found")
	assert.Error(t, err)
}

func TestFindToolsRoot(t *testing.T) {
	wd, err := os.Getwd()
	require.NoError(t, err)
	root, ok := findToolsRoot(wd)
	require.True(t, ok)
	assert.FileExists(t, filepath.Join(root, "tools", "go.mod"))
	assert.True(t, isToolsModule(filepath.Join(root, "tools", "go.mod")))

	other := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(other, "tools"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(other, "tools", "go.mod"), []byte("module example.com/tools\n"), 0o644))
	_, ok = findToolsRoot(other)
	assert.False(t, ok, "a tools/go.mod of another module is not the sessionflow root")

	mine := fakeCheckout(t)
	nested := filepath.Join(mine, "a", "b")
	require.NoError(t, os.MkdirAll(nested, 0o755))
	root, ok = findToolsRoot(nested)
	require.True(t, ok)
	assert.Equal(t, mine, root)
}

// fakeCheckout returns a directory that looks like a sessionflow checkout
// (a tools/go.mod of the sessionflow tools module).
func fakeCheckout(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "tools"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tools", "go.mod"), []byte("module github.com/sessionflow/sessionflow/tools\n\ngo 1.26\n"), 0o644))
	return dir
}

func TestBuildRunsOnceForConcurrentCallers(t *testing.T) {
	const callers = 4
	cache := t.TempDir()
	checkout := fakeCheckout(t)
	var calls atomic.Int32
	waiting := make(chan struct{}, callers)
	// The build holds the lock until every other caller waits for it, so
	// they all found the cache empty before the build finished.
	build := fakeBuild(&calls, func() {
		for range callers - 1 {
			<-waiting
		}
	})
	paths := make([]string, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		l := testLocator(t, cache)
		l.opts.WorkDir = checkout
		l.build = build
		l.onWait = func() { waiting <- struct{}{} }
		wg.Add(1)
		go func() {
			defer wg.Done()
			paths[i], errs[i] = l.locate(context.Background())
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), calls.Load())
	bin := filepath.Join(cache, binaryName())
	for i := range callers {
		require.NoError(t, errs[i])
		assert.Equal(t, bin, paths[i])
	}
	assert.NoFileExists(t, bin+".tmp")
}

func TestBuildRechecksCacheAfterLock(t *testing.T) {
	cache := t.TempDir()
	bin := filepath.Join(cache, binaryName())
	lf, err := os.OpenFile(bin+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	defer lf.Close()
	ok, err := toolbuild.TryLock(lf)
	require.NoError(t, err)
	require.True(t, ok)

	l := testLocator(t, cache)
	l.opts.WorkDir = fakeCheckout(t)
	waiting := make(chan struct{})
	l.onWait = func() { close(waiting) }
	done := make(chan error, 1)
	var got string
	go func() {
		var err error
		got, err = l.locate(context.Background())
		done <- err
	}()
	<-waiting
	// Another process finishes its build while this caller waits.
	writeExecutable(t, bin, "#!/bin/sh\n")
	require.NoError(t, toolbuild.Unlock(lf))
	require.NoError(t, <-done)
	assert.Equal(t, bin, got)
}

func TestBuildLockWaitHonorsContext(t *testing.T) {
	cache := t.TempDir()
	lf, err := os.OpenFile(filepath.Join(cache, binaryName())+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	defer lf.Close()
	ok, err := toolbuild.TryLock(lf)
	require.NoError(t, err)
	require.True(t, ok)
	defer func() { _ = toolbuild.Unlock(lf) }()

	ctx, cancel := context.WithCancel(context.Background())
	l := testLocator(t, cache)
	l.opts.WorkDir = fakeCheckout(t)
	l.onWait = cancel
	_, err = l.locate(ctx)
	require.ErrorIs(t, err, context.Canceled)
}

func TestBuildFailureLeavesNoBinary(t *testing.T) {
	cache := t.TempDir()
	bin := filepath.Join(cache, binaryName())
	l := testLocator(t, cache)
	l.opts.WorkDir = fakeCheckout(t)
	boom := errors.New("compiler exploded")
	l.build = func(_ context.Context, _, out string) error {
		require.NoError(t, os.WriteFile(out, []byte("partial"), 0o755))
		return boom
	}
	_, err := l.locate(context.Background())
	require.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), "building the Temporal CLI")
	assert.NoFileExists(t, bin)
	assert.NoFileExists(t, bin+".tmp")

	var calls atomic.Int32
	l.build = fakeBuild(&calls, nil)
	got, err := l.locate(context.Background())
	require.NoError(t, err)
	assert.Equal(t, bin, got)
	assert.Equal(t, int32(1), calls.Load())
}

func TestBuildWithoutCheckoutFails(t *testing.T) {
	l := testLocator(t, t.TempDir())
	l.opts.WorkDir = t.TempDir()
	l.sourceDir = ""
	_, err := l.locate(context.Background())
	require.ErrorIs(t, err, ErrCLINotFound)
	assert.Contains(t, err.Error(), "TEMPORAL_CLI")
}

// notifyWriter records writes and signals each one.
type notifyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (w *notifyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestBuildReportsProgress(t *testing.T) {
	cache := t.TempDir()
	out := &notifyWriter{wrote: make(chan struct{}, 1)}
	l := testLocator(t, cache)
	l.opts.WorkDir = fakeCheckout(t)
	l.opts.Progress = out
	l.progressEvery = time.Millisecond
	var calls atomic.Int32
	// The build lasts until an elapsed-time line was printed.
	l.build = fakeBuild(&calls, func() {
		for !strings.Contains(out.String(), "elapsed") {
			<-out.wrote
		}
	})
	_, err := l.locate(context.Background())
	require.NoError(t, err)
	text := out.String()
	assert.True(t, strings.HasPrefix(text, buildMessage+"\n"), text)
	assert.Contains(t, text, "still building the Temporal CLI (")
	assert.Contains(t, text, "built the Temporal CLI in ")
}

// TestBuildRealCLI builds the Temporal CLI from the tools/ module into an
// empty cache, as a fresh machine does. With the Go build cache warm (.ci/run
// prepares the CLI before the tests) this is a link of the cached build.
func TestBuildRealCLI(t *testing.T) {
	cache := t.TempDir()
	l := newLocator(LocateOptions{CacheDir: cache, Getenv: env(nil), Progress: os.Stderr})
	l.lookPath = noPath
	got, err := l.locate(context.Background())
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(cache, binaryName()), got)
	v, err := cliVersion(context.Background(), got)
	require.NoError(t, err)
	assert.Equal(t, semver{1, 5, 1}, v)
}
