package jsonl_test

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
)

// syncKindFS is the OS filesystem counting, over the files it opened, the
// fsyncs and the fdatasyncs.
type syncKindFS struct {
	jsonl.OSFS
	syncs, dataSyncs *atomic.Int64
}

func (f syncKindFS) OpenFile(name string, flag int, perm os.FileMode) (jsonl.File, error) {
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return syncKindFile{File: file, fs: f}, nil
}

type syncKindFile struct {
	jsonl.File
	fs syncKindFS
}

func (f syncKindFile) Sync() error {
	f.fs.syncs.Add(1)
	return f.File.Sync()
}

func (f syncKindFile) SyncData() error {
	f.fs.dataSyncs.Add(1)
	return f.File.(jsonl.DataSyncer).SyncData()
}

// An append to the log is made durable with fdatasync where the file has
// it (the appended bytes and the size, not the times); a new file, its
// directory and a file that does not declare it are synced with fsync.
func TestAppendsSyncDataNewFilesSync(t *testing.T) {
	var syncs, dataSyncs atomic.Int64
	e := newEnv(t, jsonl.CompressionNone, syncKindFS{syncs: &syncs, dataSyncs: &dataSyncs})
	hd := create(t, e.store, header("ds", t.TempDir()))
	require.Zero(t, dataSyncs.Load(), "the create published its files with fsync")

	// The first append publishes the log file: fsyncs of the file and its
	// directory.
	require.NoError(t, hd.Append(bg, completedTurn(t, 0, 1)))
	require.Zero(t, dataSyncs.Load(), "a new file is synced with fsync")
	published := syncs.Load()
	require.Positive(t, published)

	require.NoError(t, hd.Append(bg, completedTurn(t, 6, 2)))
	require.NoError(t, hd.Append(bg, completedTurn(t, 12, 3)))
	require.Equal(t, int64(2), dataSyncs.Load(), "one fdatasync of the log per append")
	require.Equal(t, published, syncs.Load(), "no fsync for an append to the log")
	require.Len(t, readHandle(t, hd), 18)

	// A wrapper that declares only Sync gets Sync.
	var n atomic.Int64
	e2 := newEnv(t, jsonl.CompressionNone, syncOnlyFS{n: &n})
	hd2 := create(t, e2.store, header("ds2", t.TempDir()))
	require.NoError(t, hd2.Append(bg, completedTurn(t, 0, 1)))
	before := n.Load()
	require.NoError(t, hd2.Append(bg, completedTurn(t, 6, 2)))
	require.Equal(t, before+1, n.Load())
}

type syncOnlyFS struct {
	jsonl.OSFS
	n *atomic.Int64
}

func (f syncOnlyFS) OpenFile(name string, flag int, perm os.FileMode) (jsonl.File, error) {
	file, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return syncOnlyFile{File: file, n: f.n}, nil
}

type syncOnlyFile struct {
	jsonl.File
	n *atomic.Int64
}

func (f syncOnlyFile) Sync() error { f.n.Add(1); return f.File.Sync() }

// OSFS's files flush with fdatasync(2); its errors name the file.
func TestOSFSFileSyncData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := jsonl.OSFS{}.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	_, err = f.Write([]byte("x\n"))
	require.NoError(t, err)
	ds, ok := f.(jsonl.DataSyncer)
	require.True(t, ok, "OSFS's files are DataSyncers")
	require.NoError(t, ds.SyncData())
	require.NoError(t, f.Close())
	err = ds.SyncData()
	require.Error(t, err, "a closed file")
}
