package bench

import (
	"os"
	"sync/atomic"
	"time"

	"github.com/sessionflow/sessionflow/jsonl"
)

// syncCounter counts the fsyncs of the worker's store and the time they
// took. While skip is set the fsyncs are counted but not made: the store
// is then not durable, which only the floor measurement
// (PatternSessionflowNoSync) allows.
type syncCounter struct {
	n    atomic.Int64
	ns   atomic.Int64
	skip atomic.Bool
}

// add counts one fsync of d.
func (c *syncCounter) add(d time.Duration) {
	c.n.Add(1)
	c.ns.Add(int64(d))
}

// read returns the fsyncs so far and their time.
func (c *syncCounter) read() (int, time.Duration) {
	if c == nil {
		return 0, 0
	}
	return int(c.n.Load()), time.Duration(c.ns.Load())
}

// timedFS is the operating system's filesystem for the worker's store,
// counting every fsync of a file it opened on c.
type timedFS struct {
	jsonl.FS
	c *syncCounter
}

// OpenFile opens a file whose Sync is counted.
func (f timedFS) OpenFile(name string, flag int, perm os.FileMode) (jsonl.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return timedFile{File: file, c: f.c}, nil
}

// timedFile is a file of a timedFS.
type timedFile struct {
	jsonl.File
	c *syncCounter
}

// SyncData flushes the file's data and size (the store's appends:
// jsonl.DataSyncer) and counts it as an fsync; it only counts it while the
// counter skips fsyncs. A file that cannot is synced with Sync.
func (f timedFile) SyncData() error {
	if d, ok := f.File.(jsonl.DataSyncer); ok {
		return f.timed(d.SyncData)
	}
	return f.timed(f.File.Sync)
}

// Sync flushes the file and counts the fsync; it only counts it while the
// counter skips fsyncs.
func (f timedFile) Sync() error { return f.timed(f.File.Sync) }

// timed runs sync and counts it with its time, or only counts it while the
// counter skips fsyncs.
func (f timedFile) timed(sync func() error) error {
	if f.c.skip.Load() {
		f.c.add(0)
		return nil
	}
	t0 := time.Now()
	err := sync()
	f.c.add(time.Since(t0))
	return err
}
