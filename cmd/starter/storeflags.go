package main

import (
	"github.com/spf13/pflag"

	"github.com/sessionflow/sessionflow/client"
)

// addRoot registers --root (described by rootUsage) and --compression on
// fs.
func (sf *storeFlags) addRoot(fs *pflag.FlagSet, rootUsage string) {
	fs.StringVar(&sf.root, "root", "", rootUsage)
	fs.StringVar(&sf.compression, "compression", "", "encoding of the root: none or zstd (default $"+envCompression+", else zstd)")
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
