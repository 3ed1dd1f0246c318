// Command mutate is the mutation-testing tool of sessionflow. It plants one
// small bug (a mutant) at a time in the non-test Go files of one package of
// the main module, runs the chosen tests against it, and reports whether the
// tests noticed (KILLED), did not (SURVIVED), or hung (TIMED OUT).
//
// The source tree is never modified: each mutant is handed to the go command
// as a file overlay (go test -overlay). Mutants on lines that the tests do
// not execute are reported as NOT COVERED and not run; mutants that do not
// compile are reported as NOT VIABLE. Both are left out of the score.
//
// Usage, from the repository root:
//
//	go run -C tools ./mutate -module .. [flags] ./session
//	go run -C tools ./mutate -module .. -tests ./testsuite -run 'TestS0_' ./workflows
//
// Operators (all on by default, pick with -ops):
//
//	CONDITIONALS_BOUNDARY  < <=, > >=  swapped
//	CONDITIONALS_NEGATION  == !=, < >=, > <=  swapped
//	ARITHMETIC_BASE        + -, * /, % *  swapped (numeric operands only)
//	INCREMENT_DECREMENT    ++ --  swapped
//	INVERT_NEGATIVES       -x becomes +x
//	INVERT_LOGICAL         && ||  swapped
//	REMOVE_CALL            a call statement whose result is ignored is removed
//	                       (plain, deferred, or assigned to _), logging excepted
//	ERROR_NIL              a returned non-nil error becomes nil
//
// A surviving mutant that cannot be told apart from the original by any
// test (an equivalent mutant) is listed by its key in the file given with
// -equivalent, one per line as "KEY<TAB>reason"; those are counted apart
// and left out of the score.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"hash/fnv"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Operator names.
const (
	opBoundary = "CONDITIONALS_BOUNDARY"
	opNegation = "CONDITIONALS_NEGATION"
	opArith    = "ARITHMETIC_BASE"
	opIncDec   = "INCREMENT_DECREMENT"
	opNegative = "INVERT_NEGATIVES"
	opLogical  = "INVERT_LOGICAL"
	opRemove   = "REMOVE_CALL"
	opErrNil   = "ERROR_NIL"
)

var allOps = []string{opBoundary, opNegation, opArith, opIncDec, opNegative, opLogical, opRemove, opErrNil}

// Result statuses.
const (
	stKilled     = "KILLED"
	stSurvived   = "SURVIVED"
	stTimedOut   = "TIMED OUT"
	stNotCovered = "NOT COVERED"
	stNotViable  = "NOT VIABLE"
	stEquivalent = "EQUIVALENT"
)

type config struct {
	module     string
	tests      []string
	run        string
	skip       string
	timeout    time.Duration
	workers    int
	ops        map[string]bool
	only       *regexp.Regexp
	equivalent string
	out        string
	dry        bool
	cover      bool
	verbose    bool
	sample     float64
	from       string
	shuffle    bool
}

// mutant is one planted change.
type mutant struct {
	Index   int     `json:"index"`
	File    string  `json:"file"` // relative to the module root
	Line    int     `json:"line"`
	Col     int     `json:"col"`
	Op      string  `json:"op"`
	Func    string  `json:"func"`
	Change  string  `json:"change"`
	Key     string  `json:"key"`
	Status  string  `json:"status"`
	Seconds float64 `json:"seconds,omitempty"`
	Detail  string  `json:"detail,omitempty"`
	absFile string
	apply   func()
	undo    func()
	astFile *ast.File
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
}

func run() error {
	var cfg config
	var tests, ops, only string
	flag.StringVar(&cfg.module, "module", ".", "root directory of the module under test")
	flag.StringVar(&tests, "tests", "", "comma-separated packages whose tests run against each mutant (default: the mutated package)")
	flag.StringVar(&cfg.run, "run", "", "go test -run pattern")
	flag.StringVar(&cfg.skip, "skip", "", "go test -skip pattern")
	flag.DurationVar(&cfg.timeout, "timeout", 0, "go test -timeout for each mutant (default: 3x the baseline run plus 30s)")
	flag.IntVar(&cfg.workers, "workers", 1, "mutants tested at once")
	flag.StringVar(&ops, "ops", strings.Join(allOps, ","), "comma-separated operators")
	flag.StringVar(&only, "only", "", "regexp over FILE:LINE selecting the mutants to run")
	flag.StringVar(&cfg.equivalent, "equivalent", "", "file of equivalent mutant keys (KEY<TAB>reason per line)")
	flag.StringVar(&cfg.out, "out", "", "write every result as a JSON line to this file")
	flag.BoolVar(&cfg.dry, "dry-run", false, "list the mutants without running tests")
	flag.BoolVar(&cfg.cover, "cover", true, "skip mutants on lines the tests do not cover")
	flag.BoolVar(&cfg.verbose, "v", false, "print the test output of surviving mutants")
	flag.StringVar(&cfg.from, "from", "", "results file of an earlier run (-out): its killed, timed-out, not-viable and not-covered mutants are taken over by key, the rest are run")
	reportFile := flag.String("report", "", "print the summary of a results file (-out) with the -equivalent list applied, without running anything")
	flag.BoolVar(&cfg.shuffle, "shuffle", false, "run the mutants in a stable pseudo-random order instead of source order")
	flag.Float64Var(&cfg.sample, "sample", 1, "fraction of the mutants to run, chosen by a hash of each mutant's key (stable across runs)")
	flag.Parse()
	if *reportFile != "" {
		return reportOnly(*reportFile, cfg.equivalent)
	}
	if flag.NArg() != 1 {
		return errors.New("usage: mutate [flags] ./package")
	}
	abs, err := filepath.Abs(cfg.module)
	if err != nil {
		return err
	}
	cfg.module = abs
	target := flag.Arg(0)
	if tests == "" {
		cfg.tests = []string{target}
	} else {
		cfg.tests = strings.Split(tests, ",")
	}
	cfg.ops = map[string]bool{}
	for _, o := range strings.Split(ops, ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		found := false
		for _, k := range allOps {
			if k == o {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("unknown operator %q", o)
		}
		cfg.ops[o] = true
	}
	if only != "" {
		if cfg.only, err = regexp.Compile(only); err != nil {
			return err
		}
	}
	equiv := map[string]string{}
	if cfg.equivalent != "" {
		if equiv, err = readEquivalent(cfg.equivalent); err != nil {
			return err
		}
	}

	pkg, err := loadPackage(cfg.module, target)
	if err != nil {
		return err
	}
	muts, err := collect(cfg, pkg)
	if err != nil {
		return err
	}
	if cfg.only != nil {
		kept := muts[:0]
		for _, m := range muts {
			if cfg.only.MatchString(fmt.Sprintf("%s:%d", m.File, m.Line)) {
				kept = append(kept, m)
			}
		}
		muts = kept
	}
	if cfg.sample < 1 {
		kept := muts[:0]
		for _, m := range muts {
			h := fnv.New32a()
			h.Write([]byte(m.Key))
			if float64(h.Sum32()) < cfg.sample*(1<<32) {
				kept = append(kept, m)
			}
		}
		muts = kept
	}
	if cfg.shuffle {
		// A stable pseudo-random order: a run stopped early has measured an
		// unbiased part of the package rather than its first files.
		hash := func(m *mutant) uint32 {
			h := fnv.New32a()
			h.Write([]byte("order:" + m.Key))
			return h.Sum32()
		}
		sort.SliceStable(muts, func(i, j int) bool { return hash(muts[i]) < hash(muts[j]) })
	}
	fmt.Printf("package %s: %d mutants\n", pkg.ImportPath, len(muts))
	if cfg.dry {
		for _, m := range muts {
			fmt.Printf("%-22s %s:%d:%d  %s  [%s]\n", m.Op, m.File, m.Line, m.Col, m.Change, m.Key)
		}
		return nil
	}

	tmp, err := os.MkdirTemp("", "mutate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	fmt.Println("baseline: running the tests on the unmodified code")
	start := time.Now()
	profile := filepath.Join(tmp, "cover.out")
	args := []string{"test", "-count=1", "-vet=off"}
	if cfg.cover {
		args = append(args, "-coverpkg="+pkg.ImportPath, "-coverprofile="+profile)
	}
	args = append(args, testFilter(cfg)...)
	args = append(args, cfg.tests...)
	outText, code, _ := goCmd(context.Background(), cfg.module, args)
	if code != 0 {
		return fmt.Errorf("the tests fail on the unmodified code:\n%s", outText)
	}
	base := time.Since(start)
	fmt.Printf("baseline: passed in %s\n", base.Round(time.Second))
	if cfg.timeout == 0 {
		cfg.timeout = 3*base + 30*time.Second
	}
	var cov coverage
	if cfg.cover {
		rel, _ := filepath.Rel(cfg.module, pkg.Dir)
		if cov, err = readCoverage(profile, pkg.ImportPath, filepath.ToSlash(rel)); err != nil {
			return err
		}
	}

	var outFile *os.File
	if cfg.out != "" {
		if outFile, err = os.Create(cfg.out); err != nil {
			return err
		}
		defer outFile.Close()
	}

	type job struct {
		m   *mutant
		src []byte
	}
	jobs := make(chan job)
	var mu sync.Mutex
	var wg sync.WaitGroup
	report := func(m *mutant) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf("%-11s %-22s %s:%d:%d  %s  (%.0fs)\n", m.Status, m.Op, m.File, m.Line, m.Col, m.Change, m.Seconds)
		if m.Status == stTimedOut && m.Detail != "" {
			fmt.Printf("            %s\n", m.Detail)
		}
		if m.Status == stSurvived {
			fmt.Printf("            key: %s\n", m.Key)
			if cfg.verbose && m.Detail != "" {
				fmt.Println(indent(m.Detail))
			}
		}
		if outFile != nil {
			b, _ := json.Marshal(m)
			outFile.Write(append(b, '\n'))
		}
	}
	for w := 0; w < cfg.workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				testMutant(cfg, tmp, j.m, j.src)
				report(j.m)
			}
		}()
	}
	previous := map[string]mutant{}
	if cfg.from != "" {
		if previous, err = readResults(cfg.from); err != nil {
			return err
		}
	}
	for _, m := range muts {
		if p, ok := previous[m.Key]; ok && p.Status != stSurvived && p.Status != stEquivalent {
			m.Status, m.Seconds, m.Detail = p.Status, 0, "from "+cfg.from
			report(m)
			continue
		}
		if cfg.cover && !cov.covered(m.File, m.Line, m.Col) {
			m.Status = stNotCovered
			report(m)
			continue
		}
		m.apply()
		var buf bytes.Buffer
		ferr := format.Node(&buf, pkg.fset, m.astFile)
		m.undo()
		if ferr != nil {
			m.Status = stNotViable
			m.Detail = ferr.Error()
			report(m)
			continue
		}
		jobs <- job{m, buf.Bytes()}
	}
	close(jobs)
	wg.Wait()

	for _, m := range muts {
		if m.Status == stSurvived {
			if _, ok := equiv[m.Key]; ok {
				m.Status = stEquivalent
			}
		}
	}
	summarize(muts)
	return nil
}

func summarize(muts []*mutant) {
	counts := map[string]int{}
	for _, m := range muts {
		counts[m.Status]++
	}
	detected := counts[stKilled] + counts[stTimedOut]
	scored := detected + counts[stSurvived]
	fmt.Println()
	fmt.Printf("killed %d, timed out %d, survived %d, equivalent %d, not covered %d, not viable %d\n",
		counts[stKilled], counts[stTimedOut], counts[stSurvived], counts[stEquivalent], counts[stNotCovered], counts[stNotViable])
	if scored > 0 {
		fmt.Printf("score: %d/%d non-equivalent covered mutants detected = %.1f%%\n", detected, scored, 100*float64(detected)/float64(scored))
	}
	if counts[stSurvived] > 0 {
		fmt.Println("survivors:")
		for _, m := range muts {
			if m.Status == stSurvived {
				fmt.Printf("  %s:%d:%d %s %s\n", m.File, m.Line, m.Col, m.Op, m.Change)
			}
		}
	}
}

func testFilter(cfg config) []string {
	var a []string
	if cfg.run != "" {
		a = append(a, "-run="+cfg.run)
	}
	if cfg.skip != "" {
		a = append(a, "-skip="+cfg.skip)
	}
	return a
}

// testMutant runs the tests against one mutant through an overlay.
func testMutant(cfg config, tmp string, m *mutant, src []byte) {
	dir := filepath.Join(tmp, strconv.Itoa(m.Index))
	defer os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		m.Status, m.Detail = stNotViable, err.Error()
		return
	}
	mutFile := filepath.Join(dir, filepath.Base(m.absFile))
	overlay := filepath.Join(dir, "overlay.json")
	ov, _ := json.Marshal(map[string]map[string]string{"Replace": {m.absFile: mutFile}})
	if err := os.WriteFile(mutFile, src, 0o644); err != nil {
		m.Status, m.Detail = stNotViable, err.Error()
		return
	}
	if err := os.WriteFile(overlay, ov, 0o644); err != nil {
		m.Status, m.Detail = stNotViable, err.Error()
		return
	}
	args := []string{"test", "-count=1", "-vet=off", "-failfast", "-overlay=" + overlay, "-timeout=" + cfg.timeout.String()}
	args = append(args, testFilter(cfg)...)
	args = append(args, cfg.tests...)
	// The outer limit leaves room for compiling and linking on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout+3*time.Minute)
	defer cancel()
	start := time.Now()
	out, code, err := goCmd(ctx, cfg.module, args)
	m.Seconds = time.Since(start).Seconds()
	switch {
	case ctx.Err() != nil:
		m.Status = stTimedOut
		m.Detail = "killed after the outer limit"
	case code == 0 && err == nil:
		m.Status = stSurvived
		m.Detail = lastLines(out, 20)
	case strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]"):
		m.Status = stNotViable
		m.Detail = lastLines(out, 10)
	case strings.Contains(out, "panic: test timed out"):
		// Keep the tests that were running: one that ran for the whole
		// limit hung; one that had just started means the run was slow.
		m.Status = stTimedOut
		if _, running, ok := strings.Cut(out, "running tests:"); ok {
			m.Detail = "running tests:" + strings.Join(strings.Fields(strings.SplitN(running, "\n\n", 2)[0]), " ")
		}
	default:
		m.Status = stKilled
		m.Detail = firstFailure(out)
	}
}

func goCmd(ctx context.Context, dir string, args []string) (string, int, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var buf bytes.Buffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	if err := cmd.Start(); err != nil {
		return "", -1, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		// Kill the whole group: go test's children would otherwise live on.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
		err = nil
	}
	return buf.String(), code, err
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func firstFailure(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "--- FAIL") {
			return strings.TrimSpace(l)
		}
	}
	return lastLines(s, 3)
}

func indent(s string) string {
	return "            | " + strings.ReplaceAll(s, "\n", "\n            | ")
}

// reportOnly summarizes an earlier run's results file.
func reportOnly(path, equivalent string) error {
	results, err := readResults(path)
	if err != nil {
		return err
	}
	equiv := map[string]string{}
	if equivalent != "" {
		if equiv, err = readEquivalent(equivalent); err != nil {
			return err
		}
	}
	var muts []*mutant
	for _, m := range results {
		m := m
		if m.Status == stSurvived {
			if _, ok := equiv[m.Key]; ok {
				m.Status = stEquivalent
			}
		}
		muts = append(muts, &m)
	}
	sort.Slice(muts, func(i, j int) bool { return muts[i].Index < muts[j].Index })
	summarize(muts)
	return nil
}

func readResults(path string) (map[string]mutant, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]mutant{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m mutant
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out[m.Key] = m
	}
	return out, sc.Err()
}

func readEquivalent(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, reason, _ := strings.Cut(line, "\t")
		m[strings.TrimSpace(key)] = strings.TrimSpace(reason)
	}
	return m, sc.Err()
}

// listed is the part of `go list -json` the tool reads.
type listed struct {
	ImportPath string
	Dir        string
	Export     string
	GoFiles    []string
	DepOnly    bool
	fset       *token.FileSet
	files      []*ast.File
	names      []string
	info       *types.Info
}

// loadPackage parses and type-checks the target package against the export
// data of its dependencies, as compiled by the go command.
func loadPackage(module, target string) (*listed, error) {
	out, code, err := goCmd(context.Background(), module, []string{"list", "-deps", "-export", "-json", target})
	if err != nil || code != 0 {
		return nil, fmt.Errorf("go list %s: %v\n%s", target, err, out)
	}
	exports := map[string]string{}
	var pkg *listed
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		exports[p.ImportPath] = p.Export
		if !p.DepOnly {
			q := p
			pkg = &q
		}
	}
	if pkg == nil {
		return nil, fmt.Errorf("go list %s: no package", target)
	}
	pkg.fset = token.NewFileSet()
	for _, name := range pkg.GoFiles {
		path := filepath.Join(pkg.Dir, name)
		f, err := parser.ParseFile(pkg.fset, path, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		pkg.files = append(pkg.files, f)
		pkg.names = append(pkg.names, path)
	}
	imp := importer.ForCompiler(pkg.fset, "gc", func(path string) (io.ReadCloser, error) {
		e, ok := exports[path]
		if !ok || e == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(e)
	})
	pkg.info = &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	conf := types.Config{Importer: imp}
	if _, err := conf.Check(pkg.ImportPath, pkg.fset, pkg.files, pkg.info); err != nil {
		return nil, fmt.Errorf("type-check %s: %w", pkg.ImportPath, err)
	}
	return pkg, nil
}

// loggingMethods are calls whose removal only silences a log line.
var loggingMethods = map[string]bool{
	"Debug": true, "Info": true, "Warn": true, "Error": true,
	"DebugContext": true, "InfoContext": true, "WarnContext": true, "ErrorContext": true,
	"Log": true, "LogAttrs": true, "Printf": true, "Println": true, "Print": true,
}

// collect finds every mutant of the package, in source order.
func collect(cfg config, pkg *listed) ([]*mutant, error) {
	var muts []*mutant
	seen := map[string]int{}
	for fi, f := range pkg.files {
		absFile := pkg.names[fi]
		rel, _ := filepath.Rel(cfg.module, absFile)
		rel = filepath.ToSlash(rel)
		src, err := os.ReadFile(absFile)
		if err != nil {
			return nil, err
		}
		lines := strings.Split(string(src), "\n")
		add := func(pos token.Pos, op, fn, change string, apply, undo func()) {
			if !cfg.ops[op] {
				return
			}
			p := pkg.fset.Position(pos)
			text := ""
			if p.Line-1 < len(lines) {
				text = strings.Join(strings.Fields(lines[p.Line-1]), " ")
			}
			base := fmt.Sprintf("%s|%s|%s|%s|%s", rel, fn, op, change, text)
			n := seen[base]
			seen[base]++
			muts = append(muts, &mutant{
				Index: len(muts), File: rel, Line: p.Line, Col: p.Column, Op: op, Func: fn,
				Change: change, Key: fmt.Sprintf("%s#%d", base, n),
				absFile: absFile, apply: apply, undo: undo, astFile: f,
			})
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			fn := funcName(fd)
			walkFunc(pkg, fd.Type, fd.Body, fn, add)
		}
	}
	return muts, nil
}

type adder func(pos token.Pos, op, fn, change string, apply, undo func())

// walkFunc visits one function body; nested function literals are visited
// with their own signature so that ERROR_NIL knows their result types.
func walkFunc(pkg *listed, ftype *ast.FuncType, body *ast.BlockStmt, fn string, add adder) {
	ast.Inspect(body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.FuncLit:
			walkFunc(pkg, x.Type, x.Body, fn+".func", add)
			return false
		case *ast.BinaryExpr:
			binary(pkg, x, fn, add)
		case *ast.IncDecStmt:
			orig := x.Tok
			alt := token.DEC
			if orig == token.DEC {
				alt = token.INC
			}
			add(x.TokPos, opIncDec, fn, orig.String()+" -> "+alt.String(),
				func() { x.Tok = alt }, func() { x.Tok = orig })
		case *ast.UnaryExpr:
			if x.Op == token.SUB {
				if _, lit := x.X.(*ast.BasicLit); !lit {
					add(x.OpPos, opNegative, fn, "-x -> +x",
						func() { x.Op = token.ADD }, func() { x.Op = token.SUB })
				}
			}
		case *ast.BlockStmt:
			removals(x.List, fn, add)
		case *ast.CaseClause:
			removals(x.Body, fn, add)
		case *ast.CommClause:
			removals(x.Body, fn, add)
		case *ast.ReturnStmt:
			errorNil(ftype, x, fn, add)
		}
		return true
	})
}

func binary(pkg *listed, x *ast.BinaryExpr, fn string, add adder) {
	orig := x.Op
	set := func(op string, to token.Token) {
		add(x.OpPos, op, fn, orig.String()+" -> "+to.String(),
			func() { x.Op = to }, func() { x.Op = orig })
	}
	switch orig {
	case token.LSS:
		set(opBoundary, token.LEQ)
		set(opNegation, token.GEQ)
	case token.LEQ:
		set(opBoundary, token.LSS)
		set(opNegation, token.GTR)
	case token.GTR:
		set(opBoundary, token.GEQ)
		set(opNegation, token.LEQ)
	case token.GEQ:
		set(opBoundary, token.GTR)
		set(opNegation, token.LSS)
	case token.EQL:
		set(opNegation, token.NEQ)
	case token.NEQ:
		set(opNegation, token.EQL)
	case token.LAND:
		set(opLogical, token.LOR)
	case token.LOR:
		set(opLogical, token.LAND)
	case token.ADD, token.SUB, token.MUL, token.QUO, token.REM:
		tv, ok := pkg.info.Types[x]
		if !ok || tv.Value != nil { // constant expressions are left alone
			return
		}
		b, ok := tv.Type.Underlying().(*types.Basic)
		if !ok || b.Info()&types.IsNumeric == 0 {
			return
		}
		to := map[token.Token]token.Token{token.ADD: token.SUB, token.SUB: token.ADD, token.MUL: token.QUO, token.QUO: token.MUL, token.REM: token.MUL}[orig]
		set(opArith, to)
	}
}

// removals offers the removal of every call statement of a statement list.
func removals(list []ast.Stmt, fn string, add adder) {
	for i, s := range list {
		var call *ast.CallExpr
		switch st := s.(type) {
		case *ast.ExprStmt:
			call, _ = st.X.(*ast.CallExpr)
		case *ast.DeferStmt:
			call = st.Call
		case *ast.AssignStmt:
			if len(st.Lhs) == 1 && len(st.Rhs) == 1 && isBlank(st.Lhs[0]) {
				call, _ = st.Rhs[0].(*ast.CallExpr)
			}
		}
		if call == nil || isLogging(call) {
			continue
		}
		i, s := i, s
		add(s.Pos(), opRemove, fn, "remove "+callName(call)+"(...)",
			func() { list[i] = &ast.EmptyStmt{Semicolon: s.Pos(), Implicit: true} },
			func() { list[i] = s })
	}
}

// errorNil offers, for every returned value in an error result slot that is
// not already nil, to return nil instead.
func errorNil(ftype *ast.FuncType, r *ast.ReturnStmt, fn string, add adder) {
	if ftype.Results == nil {
		return
	}
	var slots []ast.Expr
	for _, fld := range ftype.Results.List {
		n := len(fld.Names)
		if n == 0 {
			n = 1
		}
		for k := 0; k < n; k++ {
			slots = append(slots, fld.Type)
		}
	}
	if len(r.Results) != len(slots) {
		return
	}
	for i, e := range r.Results {
		if id, ok := slots[i].(*ast.Ident); !ok || id.Name != "error" {
			continue
		}
		if id, ok := e.(*ast.Ident); ok && id.Name == "nil" {
			continue
		}
		i, e := i, e
		add(e.Pos(), opErrNil, fn, "return error -> return nil",
			func() { r.Results[i] = &ast.Ident{NamePos: e.Pos(), Name: "nil"} },
			func() { r.Results[i] = e })
	}
}

func isBlank(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "_"
}

func isLogging(c *ast.CallExpr) bool {
	sel, ok := c.Fun.(*ast.SelectorExpr)
	return ok && loggingMethods[sel.Sel.Name]
}

func callName(c *ast.CallExpr) string {
	switch f := c.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return exprString(f.X) + "." + f.Sel.Name
	case *ast.FuncLit:
		return "func"
	}
	return "call"
}

func exprString(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprString(x.X) + "." + x.Sel.Name
	case *ast.CallExpr:
		return callName(x) + "()"
	case *ast.IndexExpr:
		return exprString(x.X) + "[...]"
	case *ast.ParenExpr:
		return "(" + exprString(x.X) + ")"
	case *ast.StarExpr:
		return "*" + exprString(x.X)
	}
	return "expr"
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		return "(*" + typeName(s.X) + ")." + fd.Name.Name
	}
	return typeName(t) + "." + fd.Name.Name
}

func typeName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.IndexExpr:
		return typeName(x.X)
	case *ast.IndexListExpr:
		return typeName(x.X)
	}
	return "T"
}

// coverage holds the statement blocks that ran in the baseline.
type coverage map[string][]block

type block struct {
	l1, c1, l2, c2 int
	count          int
}

func readCoverage(path, importPath, relDir string) (coverage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cov := coverage{}
	// Profile lines: importpath/file.go:l1.c1,l2.c2 statements count
	re := regexp.MustCompile(`^(.*):(\d+)\.(\d+),(\d+)\.(\d+) \d+ (\d+)$`)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := re.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		file, ok := strings.CutPrefix(m[1], importPath+"/")
		if !ok || strings.Contains(file, "/") {
			continue
		}
		file = relDir + "/" + file
		atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
		cov[file] = append(cov[file], block{atoi(m[2]), atoi(m[3]), atoi(m[4]), atoi(m[5]), atoi(m[6])})
	}
	for _, bs := range cov {
		sort.Slice(bs, func(i, j int) bool { return bs[i].l1 < bs[j].l1 })
	}
	return cov, sc.Err()
}

// covered reports whether a position lies in a block that ran. A position
// in no block at all (a package-level initializer) counts as covered.
func (c coverage) covered(file string, line, col int) bool {
	in := false
	for _, b := range c[file] {
		after := line > b.l1 || (line == b.l1 && col >= b.c1)
		before := line < b.l2 || (line == b.l2 && col <= b.c2)
		if after && before {
			in = true
			if b.count > 0 {
				return true
			}
		}
	}
	return !in
}
