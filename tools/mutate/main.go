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
//	go run -C tools ./mutate -module .. -tests ./workflows -run 'TestS0_' ./workflows
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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"hash/fnv"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
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
