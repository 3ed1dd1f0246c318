package layers_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The house, bottom to top (README.md, Architecture). Arrows point down only. A package belongs
// to the first rule whose packages match it; its production code may import the packages of its
// own rule and those listed under mayImport, and no other sessionflow package. "x/..." matches x
// and every package below it. Standard library and third-party imports are not checked here.
var house = []rule{
	// 1. The bottom: nothing of sessionflow below them.
	{name: "contract", pkgs: ps("wire"),
		mayImport: nil,
		why:       "the contract the client compiles against"},
	{name: "lib", pkgs: ps("internal/lib/..."),
		mayImport: nil,
		why:       "helpers the lower layers use (randhex, wftrace)"},
	{name: "web page", pkgs: ps("webui"),
		mayImport: nil,
		why:       "the web view's embedded page, which speaks only the HTTP API"},
	// 2.
	{name: "session", pkgs: ps("session"),
		mayImport: ps("wire", "internal/lib/..."),
		why:       "the event model, its validation, the harness's upgrade and fold"},
	// 3. Three neighbours; only tool leans on provider (the tool types a model sees).
	{name: "store", pkgs: ps("jsonl/..."),
		mayImport: ps("wire", "internal/lib/...", "session"),
		why:       "the JSONL store and its test filesystems"},
	{name: "provider", pkgs: ps("provider/..."),
		mayImport: ps("wire", "internal/lib/...", "session"),
		why:       "model providers: interface, assembler, vendors"},
	{name: "tool", pkgs: ps("tool/..."),
		mayImport: ps("wire", "internal/lib/...", "session", "provider"),
		why:       "the tools and the MCP bridge"},
	{name: "livetext", pkgs: ps("livetext"),
		mayImport: ps("wire", "internal/lib/...", "jsonl/..."),
		why:       "the running model call's live text beside the log, its writer and followers"},
	// 4.
	{name: "activities", pkgs: ps("activities"),
		mayImport: ps("wire", "internal/lib/...", "session", "jsonl/...", "livetext", "provider/...", "tool/..."),
		why:       "the store activities and the one activity runtime"},
	// 5.
	{name: "agent", pkgs: ps("agent"),
		mayImport: ps("wire", "internal/lib/...", "session", "jsonl/...", "livetext", "provider/...", "tool/...", "activities"),
		why:       "the agent's activities (model, tools) on the activity runtime"},
	// 6.
	{name: "workflows", pkgs: ps("workflows"),
		mayImport: ps("wire", "internal/lib/...", "session", "jsonl/...", "livetext", "provider/...", "tool/...", "activities", "agent"),
		why:       "workflow code"},
	// 7. The client stands on the contract alone.
	{name: "client", pkgs: ps("client"),
		mayImport: ps("wire"),
		why:       "the Go client needs only the contract"},
	// 8. The HTTP API stands on the store and the client; the programs
	// host it.
	{name: "httpapi", pkgs: ps("httpapi"),
		mayImport: ps("wire", "internal/lib/...", "session", "jsonl/...", "livetext", "client"),
		why:       "the session API over HTTP: the store read only, the control calls through the client"},
	{name: "program", pkgs: ps("internal/app/...", "worker", "cmd/...", "bench/...", "deploy"),
		mayImport: ps("wire", "internal/lib/...", "session", "jsonl/...", "livetext", "provider/...", "tool/...",
			"activities", "agent", "workflows", "client", "httpapi", "webui"),
		exceptions: []exception{{from: "cmd/soak", to: "testsuite/soak",
			why: "cmd/soak is the command line of the soak, which lives in testsuite/soak"}},
		why: "program wiring: worker assembly, servers, commands, benchmarks, deployment"},
	// 9.
	{name: "tests", pkgs: ps("testsuite/..."),
		mayImport: ps("wire", "internal/lib/...", "session", "jsonl/...", "livetext", "provider/...", "tool/...",
			"activities", "agent", "workflows", "client", "httpapi", "webui", "internal/app/...", "worker", "bench/...", "deploy"),
		why: "the suites, the recorded histories, the test harness"},
}

// harness is what the test files of any package may import from testsuite, besides what the
// package's own code may import: the test harness, so that a package's tests live beside it.
var harness = ps("testsuite/sessiontest", "testsuite/testdeadline")

// TestNoArrowUpTheHouse checks every import of every sessionflow package against the house.
// The failure lists each broken rule once, with what it allows, and under it each arrow that
// breaks it.
func TestNoArrowUpTheHouse(t *testing.T) {
	mod, pkgs := listModule(t)
	byRule := map[string][]string{}
	var order []string
	for _, p := range pkgs {
		for _, v := range check(mod, p) {
			if _, ok := byRule[v.rule]; !ok {
				order = append(order, v.rule)
			}
			byRule[v.rule] = append(byRule[v.rule], v.arrow)
		}
	}
	if len(order) == 0 {
		return
	}
	var b strings.Builder
	n := 0
	for _, r := range order {
		fmt.Fprintf(&b, "\n%s\n", r)
		for _, a := range byRule[r] {
			fmt.Fprintf(&b, "    %s\n", a)
			n++
		}
	}
	t.Errorf("%d import(s) against the house (README.md, Architecture; the rules are in testsuite/layers):%s", n, b.String())
}

// TestClientNeedsOnlyTheContract pins the client's whole dependency closure: no sessionflow
// package but wire, whatever imports it goes through.
func TestClientNeedsOnlyTheContract(t *testing.T) {
	mod := strings.TrimSpace(string(goList(t, "-m", "-f", "{{.Path}}")))
	out := goList(t, "-deps", "-f", "{{.ImportPath}}", "./client")
	var got []string
	for _, path := range strings.Fields(string(out)) {
		if rel, ok := strings.CutPrefix(path, mod+"/"); ok {
			got = append(got, rel)
		}
	}
	slices.Sort(got)
	if want := []string{"client", "wire"}; !slices.Equal(got, want) {
		t.Errorf("go list -deps ./client lists the sessionflow packages %v; want only %v", got, want)
	}
}

type rule struct {
	name       string
	pkgs       []pattern
	mayImport  []pattern
	exceptions []exception
	why        string
}

// exception is one named arrow a rule lets through, with its reason.
type exception struct{ from, to, why string }

type pattern string

func ps(s ...string) []pattern {
	out := make([]pattern, len(s))
	for i, v := range s {
		out[i] = pattern(v)
	}
	return out
}

func (p pattern) match(path string) bool {
	if base, ok := strings.CutSuffix(string(p), "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == string(p)
}

func matchAny(ps []pattern, path string) bool {
	return slices.ContainsFunc(ps, func(p pattern) bool { return p.match(path) })
}

// ruleOf returns the rule a module-relative package path belongs to, or nil.
func ruleOf(path string) *rule {
	for i := range house {
		if matchAny(house[i].pkgs, path) {
			return &house[i]
		}
	}
	return nil
}

// allows reports whether r's production code may import to.
func (r *rule) allows(from, to string) bool {
	if matchAny(r.pkgs, to) || matchAny(r.mayImport, to) {
		return true
	}
	return slices.ContainsFunc(r.exceptions, func(e exception) bool { return e.from == from && e.to == to })
}

func (r *rule) describe() string {
	may := "nothing else of sessionflow"
	if len(r.mayImport) > 0 {
		var s []string
		for _, p := range r.mayImport {
			s = append(s, string(p))
		}
		may = strings.Join(s, ", ")
	}
	return fmt.Sprintf("rule %q (%s): its own packages may import %s", r.name, r.why, may)
}

// Rules for what the table itself cannot say.
const (
	noLayer = `every package is in a layer: add it to a rule of testsuite/layers, the README picture and its package doc`
	// Test files (package x and x_test) of a package outside testsuite may import any package
	// of the house; from testsuite, only the harness, so that a package's tests live beside it.
	testFilesRule = `rule "test files": a package's tests may import any package of the house, and from testsuite only the harness (testsuite/sessiontest, testsuite/testdeadline)`
)

// violation is one import against the house: the rule it breaks and the arrow.
type violation struct{ rule, arrow string }

type listed struct {
	ImportPath   string
	Error        *struct{ Err string }
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// check returns the imports of p (its test files' included) that the house does not allow.
func check(mod string, p listed) []violation {
	rel := func(path string) (string, bool) { return strings.CutPrefix(path, mod+"/") }
	from, ok := rel(p.ImportPath)
	if !ok {
		return nil // the module's root package, if any, is not in the house
	}
	r := ruleOf(from)
	if r == nil {
		return []violation{{noLayer, from + " is in no layer"}}
	}
	var out []violation
	held := func(imports []string, tests string) {
		for _, imp := range imports {
			to, ok := rel(imp)
			if !ok {
				continue
			}
			switch {
			case ruleOf(to) == nil:
				out = append(out, violation{r.describe(), fmt.Sprintf("%s%s -> %s (in no layer)", from, tests, to)})
			case !r.allows(from, to):
				out = append(out, violation{r.describe(), fmt.Sprintf("%s%s -> %s (layer %q)", from, tests, to, ruleOf(to).name)})
			}
		}
	}
	held(p.Imports, "")
	if r.name == "tests" {
		// A suite's test files are held to the suite's own rule.
		held(slices.Compact(slices.Sorted(slices.Values(slices.Concat(p.TestImports, p.XTestImports)))), " (tests)")
		return out
	}
	seen := map[string]bool{}
	for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
		to, ok := rel(imp)
		if !ok || seen[to] || to == from {
			continue
		}
		seen[to] = true
		switch {
		case ruleOf(to) == nil:
			out = append(out, violation{testFilesRule, fmt.Sprintf("%s (tests) -> %s (in no layer)", from, to)})
		case ruleOf(to).name == "tests" && !matchAny(harness, to):
			out = append(out, violation{testFilesRule, fmt.Sprintf("%s (tests) -> %s", from, to)})
		}
	}
	return out
}

// listModule lists every package of the module (test files included) and returns the
// module path with them.
func listModule(t *testing.T) (string, []listed) {
	t.Helper()
	mod := strings.TrimSpace(string(goList(t, "-m", "-f", "{{.Path}}")))
	out := goList(t, "-e", "-json=ImportPath,Error,Imports,TestImports,XTestImports", "./...")
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		if p.Error != nil {
			t.Errorf("go list cannot load %s, so its imports are not checked: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages in %s; want the whole module", len(pkgs), mod)
	}
	return mod, pkgs
}

// goList runs go list at the module's root.
func goList(t *testing.T, args ...string) []byte {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}
