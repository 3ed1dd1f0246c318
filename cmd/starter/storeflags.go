package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/jsonl"
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
	return client.StoreReader(st), nil
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
