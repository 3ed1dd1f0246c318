package toolbuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testTexts() Texts {
	return Texts{
		CacheDir:      "the cache",
		OpenLock:      "the lock",
		WaitLock:      "the lock of x",
		Waiting:       "waiting (lock %s)",
		Building:      "building x",
		Still:         "still building x (%s elapsed)",
		Built:         "built x in %s: %s",
		BuildFailed:   func(err error) error { return fmt.Errorf("building x: %w", err) },
		InstallFailed: func(err error) error { return fmt.Errorf("installing x: %w", err) },
	}
}

func writeBin(_ context.Context, _, out string) error {
	return os.WriteFile(out, []byte("#!/bin/sh\n"), 0o755)
}

func TestFindRoot(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "tools"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tools", "go.mod"), []byte("module \"github.com/sessionflow/sessionflow/tools\"\n"), 0o644))
	nested := filepath.Join(dir, "a", "b")
	require.NoError(t, os.MkdirAll(nested, 0o755))
	root, ok := FindRoot(nested)
	require.True(t, ok)
	assert.Equal(t, dir, root)

	other := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(other, "tools"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(other, "tools", "go.mod"), []byte("module example.com/tools\n"), 0o644))
	_, ok = FindRoot(other)
	assert.False(t, ok)

	root, ok = FindRoot(SourceDir())
	require.True(t, ok, "this package lives in a sessionflow checkout")
	assert.FileExists(t, filepath.Join(root, "go.mod"))
}

func TestTailAndIsExecutable(t *testing.T) {
	assert.Equal(t, "cde", string(Tail([]byte("abcde"), 3)))
	assert.Equal(t, "ab", string(Tail([]byte("ab"), 3)))
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(plain, nil, 0o644))
	assert.False(t, IsExecutable(plain))
	assert.False(t, IsExecutable(dir))
	assert.False(t, IsExecutable(filepath.Join(dir, "missing")))
	require.NoError(t, writeBin(context.Background(), "", filepath.Join(dir, "bin")))
	assert.True(t, IsExecutable(filepath.Join(dir, "bin")))
}

// TestLockedBuildsOnceAmongConcurrentCallers: callers that race for the
// lock build once; the others find the binary once they hold the lock.
func TestLockedBuildsOnceAmongConcurrentCallers(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "cache", "x-v1")
	var calls atomic.Int32
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := &Build{Bin: bin, Dir: t.TempDir(), PollEvery: time.Millisecond, Texts: testTexts(),
				Run: func(ctx context.Context, dir, out string) error {
					calls.Add(1)
					time.Sleep(20 * time.Millisecond)
					return writeBin(ctx, dir, out)
				}}
			got, err := b.Locked(context.Background())
			if err == nil && got != bin {
				err = fmt.Errorf("got %s", got)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, int32(1), calls.Load())
	assert.NoFileExists(t, bin+".tmp")
}

func TestLockedReportsProgress(t *testing.T) {
	var out bytes.Buffer
	bin := filepath.Join(t.TempDir(), "x-v1")
	b := &Build{Bin: bin, Run: writeBin, Progress: &out, PollEvery: time.Millisecond, Texts: testTexts()}
	_, err := b.Locked(context.Background())
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2, out.String())
	assert.Equal(t, "building x", lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "built x in "), lines[1])
	assert.True(t, strings.HasSuffix(lines[1], ": "+bin), lines[1])
}

func TestLockedFailedBuildLeavesNothing(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "x-v1")
	boom := errors.New("boom")
	b := &Build{Bin: bin, PollEvery: time.Millisecond, Texts: testTexts(),
		Run: func(_ context.Context, _, out string) error {
			require.NoError(t, os.WriteFile(out, []byte("partial"), 0o755))
			return boom
		}}
	_, err := b.Locked(context.Background())
	require.ErrorIs(t, err, boom)
	assert.Equal(t, "building x: boom", err.Error())
	assert.NoFileExists(t, bin)
	assert.NoFileExists(t, bin+".tmp")

	// A build that reports success without an executable fails too.
	b.Run = func(context.Context, string, string) error { return nil }
	_, err = b.Locked(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "building x: the build produced no executable at ")
}

func TestLockedWaitHonoursContext(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "x-v1")
	lf, err := os.OpenFile(bin+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	defer lf.Close()
	ok, err := TryLock(lf)
	require.NoError(t, err)
	require.True(t, ok)
	defer func() { _ = Unlock(lf) }()

	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	b := &Build{Bin: bin, Run: writeBin, Progress: &out, PollEvery: time.Millisecond, OnWait: cancel, Texts: testTexts()}
	_, err = b.Locked(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, "waiting for the lock of x: context canceled", err.Error())
	assert.Equal(t, "waiting (lock "+bin+".lock)\n", out.String())
}
