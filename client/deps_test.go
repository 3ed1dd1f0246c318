package client

import (
	"bufio"
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The client needs only the contract (docs/DECISIONS.md D83): an
// application that starts sessions compiles package wire and the Temporal
// SDK, not the store, the providers or the workflows. The test walks the
// non-test imports of the module's packages from here, as
// `go list -deps ./client` lists them.
func TestClientImportsOnlyTheContract(t *testing.T) {
	root, module := moduleRoot(t)
	require.Equal(t, []string{"github.com/sessionflow/sessionflow/wire"}, moduleDeps(t, root, module, module+"/client"))
	require.Empty(t, moduleDeps(t, root, module, module+"/wire"), "wire imports no package of the module")
}

// moduleRoot returns the directory of go.mod above the test and the module
// path it declares.
func moduleRoot(t *testing.T) (dir, module string) {
	t.Helper()
	dir, err := filepath.Abs(".")
	require.NoError(t, err)
	for {
		f, err := os.Open(filepath.Join(dir, "go.mod"))
		if err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
					return dir, strings.TrimSpace(m)
				}
			}
			t.Fatalf("%s/go.mod declares no module", dir)
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, parent, dir, "no go.mod above the test")
		dir = parent
	}
}

// moduleDeps returns, sorted, the packages of module that pkg depends on
// through the imports of their non-test files, pkg itself excluded.
func moduleDeps(t *testing.T, root, module, pkg string) []string {
	t.Helper()
	seen := map[string]bool{pkg: true}
	queue := []string{pkg}
	var deps []string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		bp, err := build.ImportDir(filepath.Join(root, strings.TrimPrefix(strings.TrimPrefix(p, module), "/")), 0)
		require.NoError(t, err, p)
		for _, imp := range bp.Imports {
			if seen[imp] || (imp != module && !strings.HasPrefix(imp, module+"/")) {
				continue
			}
			seen[imp] = true
			deps = append(deps, imp)
			queue = append(queue, imp)
		}
	}
	slices.Sort(deps)
	return deps
}
