package main

import (
	"context"
	"fmt"
	"iter"
	"sync"

	"github.com/spf13/pflag"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/livetext"
	"github.com/sessionflow/sessionflow/wire"
)

// addRoot registers --root (described by rootUsage) and --compression on
// fs.
func (sf *storeFlags) addRoot(fs *pflag.FlagSet, rootUsage string) {
	fs.StringVar(&sf.root, "root", "", rootUsage)
	fs.StringVar(&sf.compression, "compression", "", "encoding of the root: none or zstd (default $"+envCompression+", else the root's marker, else zstd)")
}

// rootOf is the store root sf names: --root, else $SESSIONFLOW_ROOT, else
// "".
func (a *app) rootOf(sf *storeFlags) string {
	if sf.root != "" {
		return sf.root
	}
	return a.getenv(envRoot)
}

// storeRoot is rootOf, required: none given is a usage error.
func (a *app) storeRoot(sf *storeFlags) (string, error) {
	root := a.rootOf(sf)
	if root == "" {
		return "", usageErrorf("the store root is required: pass --root DIR or set %s", envRoot)
	}
	return root, nil
}

// hasRoot says whether a store root is given, by --root or $SESSIONFLOW_ROOT.
func (a *app) hasRoot(sf *storeFlags) bool {
	return a.rootOf(sf) != ""
}

// optionalReader returns the event reader of the store sf names, or nil
// when no root is given.
func (a *app) optionalReader(sf *storeFlags) (client.EventReader, error) {
	if !a.hasRoot(sf) {
		return nil, nil
	}
	st, err := a.openStore(sf)
	if err != nil {
		return nil, err
	}
	if sf.compression != "" || a.getenv(envCompression) != "" {
		return client.StoreReader(st), nil
	}
	if _, marked, err := jsonl.RootCompression(st.Root()); err != nil || !marked {
		// A root the worker has not marked yet (it marks it when it
		// creates it, typically moments from now).
		return &markedReader{open: func() (*jsonl.Store, error) { return a.openStore(sf) }}, nil
	}
	return client.StoreReader(st), nil
}

// optionalLive is the live text source of the root (package livetext),
// nil when no root is given: client.WatchTurn then reads the text from the
// heartbeat details alone.
func (a *app) optionalLive(sf *storeFlags) client.LiveSource {
	if !a.hasRoot(sf) {
		return nil
	}
	return storeLive{open: func() (*jsonl.Store, error) { return a.openStore(sf) }}
}

// storeLive follows live text through a store opened for each follow, so
// that a root the worker marks after the command started is opened in its
// encoding.
type storeLive struct {
	open func() (*jsonl.Store, error)
}

// FollowLive implements client.LiveSource.
func (l storeLive) FollowLive(ctx context.Context, id string) iter.Seq2[wire.LiveEvent, error] {
	return func(yield func(wire.LiveEvent, error) bool) {
		st, err := l.open()
		if err != nil {
			yield(wire.LiveEvent{}, err)
			return
		}
		for e, err := range (livetext.Source{Store: st}).FollowLive(ctx, id) {
			if !yield(e, err) {
				return
			}
		}
	}
}

// markedReader is the event reader of a root that had no marker when the
// command started: each read opens the store in the encoding the marker
// records then (rootCompression), and once the root is marked the store
// opened in its encoding is kept.
type markedReader struct {
	open func() (*jsonl.Store, error)

	mu     sync.Mutex
	marked client.EventReader
}

// ReadEvents reads through the store of the root's recorded encoding.
func (m *markedReader) ReadEvents(ctx context.Context, id string, from, to int64) ([]wire.Event, error) {
	m.mu.Lock()
	r := m.marked
	if r == nil {
		st, err := m.open()
		if err != nil {
			m.mu.Unlock()
			return nil, err
		}
		r = client.StoreReader(st)
		if _, marked, err := jsonl.RootCompression(st.Root()); err == nil && marked {
			m.marked = r
		}
	}
	m.mu.Unlock()
	return r.ReadEvents(ctx, id, from, to)
}

// rootCompression is the encoding to open root with (docs/FORMAT.md §3.5):
// the one given (comp, from source: a flag or a variable) when it agrees
// with the root's marker, the marker's when none is given, zstd when
// neither is. A given encoding the marker contradicts is an error
// (jsonl.ErrRootMismatch) before anything is sent or read, and so is a
// marker that cannot be read.
func rootCompression(root, comp, source string) (jsonl.Compression, error) {
	var given jsonl.Compression
	if comp != "" {
		c, err := jsonl.ParseCompression(comp)
		if err != nil {
			return "", usageErrorf("%s: %w", source, err)
		}
		given = c
	}
	marked, found, err := jsonl.RootCompression(root)
	if err != nil {
		return "", fmt.Errorf("open store %q: %w", root, err)
	}
	switch {
	case !found && given == "":
		return jsonl.CompressionZstd, nil
	case !found:
		return given, nil
	case given == "":
		return marked, nil
	case given != marked:
		return "", fmt.Errorf("%s is %q, but store root %q is marked for compression %q (%w); leave %s unset to open the root in its own encoding",
			source, given, root, marked, jsonl.ErrRootMismatch, source)
	}
	return given, nil
}
