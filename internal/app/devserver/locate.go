package devserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/sessionflow/sessionflow/internal/app/toolbuild"
)

// CLIVersion is the Temporal CLI release pinned by the tools/ module.
const CLIVersion = "v1.5.1"

const (
	// cliPackage is the main package of the Temporal CLI.
	cliPackage = "github.com/temporalio/cli/cmd/temporal"
	// cliVersionVar is the variable the CLI reports with --version.
	cliVersionVar = "github.com/temporalio/cli/temporalcli.Version"
	// buildMessage announces a build of the CLI.
	buildMessage = "building the Temporal CLI dev server (first run only, about 6 minutes on 2 cores)…"
)

// ErrCLINotFound is returned by Locate when no usable Temporal CLI exists and
// none can be built.
var ErrCLINotFound = errors.New("temporal CLI not found")

// LocateOptions configure Locate. The zero value searches the usual places
// and builds the CLI when none is found.
type LocateOptions struct {
	// CacheDir is the directory that holds the built CLI; the default is
	// DefaultCacheDir.
	CacheDir string
	// Progress receives progress messages of a build (and notes about a
	// skipped CLI on PATH); nil discards them.
	Progress io.Writer
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
	// WorkDir is where the search for the sessionflow module root starts
	// (the directory holding tools/go.mod); the default is the working
	// directory. The source location of this package is tried after it.
	WorkDir string
	// NoBuild makes Locate fail with ErrCLINotFound instead of building.
	NoBuild bool
}

// Locate finds a Temporal CLI binary to run the dev server with, in order:
// the TEMPORAL_CLI environment variable (a path or a command name); the
// binary built earlier into the cache directory (<cache>/temporal-v1.5.1);
// `temporal` on PATH when its --version reports 1.5.0 or newer; otherwise it
// builds the CLI from the tools/ module of the sessionflow checkout into the
// cache directory, printing progress to opts.Progress. Concurrent callers, in
// this process or others, build at most once: the build runs under a file
// lock in the cache directory and the cache is checked again once the lock is
// held.
func Locate(ctx context.Context, opts LocateOptions) (string, error) {
	return newLocator(opts).locate(ctx)
}

// DefaultCacheDir returns the cache directory of the built CLI:
// $XDG_CACHE_HOME/sessionflow when XDG_CACHE_HOME is set, else
// os.UserCacheDir()/sessionflow.
func DefaultCacheDir() (string, error) {
	return defaultCacheDir(os.Getenv)
}

func defaultCacheDir(getenv func(string) string) (string, error) {
	if x := getenv("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, "sessionflow"), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("locating the user cache directory: %w", err)
	}
	return filepath.Join(d, "sessionflow"), nil
}

// binaryName is the file name of the built CLI in the cache directory.
func binaryName() string {
	n := "temporal-" + CLIVersion
	if runtime.GOOS == "windows" {
		n += ".exe"
	}
	return n
}

// locator carries Locate's collaborators; tests replace the build, the PATH
// lookup and the timings.
type locator struct {
	opts          LocateOptions
	getenv        func(string) string
	lookPath      func(string) (string, error)
	build         func(ctx context.Context, toolsDir, out string) error
	sourceDir     string
	progressEvery time.Duration
	pollEvery     time.Duration
	// onWait is called once when the build lock is held by someone else.
	onWait func()
}

func newLocator(opts LocateOptions) *locator {
	l := &locator{
		opts:          opts,
		getenv:        opts.Getenv,
		lookPath:      exec.LookPath,
		build:         goBuild,
		progressEvery: 30 * time.Second,
		pollEvery:     250 * time.Millisecond,
	}
	if l.getenv == nil {
		l.getenv = os.Getenv
	}
	l.sourceDir = toolbuild.SourceDir()
	return l
}

func (l *locator) progressf(format string, args ...any) {
	if l.opts.Progress != nil {
		fmt.Fprintf(l.opts.Progress, format+"\n", args...)
	}
}

func (l *locator) locate(ctx context.Context) (string, error) {
	if v := l.getenv("TEMPORAL_CLI"); v != "" {
		p, err := l.lookPath(v)
		if err != nil {
			return "", fmt.Errorf("TEMPORAL_CLI=%q: %w", v, err)
		}
		return filepath.Abs(p)
	}
	cacheDir := l.opts.CacheDir
	if cacheDir == "" {
		var err error
		if cacheDir, err = defaultCacheDir(l.getenv); err != nil {
			return "", err
		}
	}
	bin := filepath.Join(cacheDir, binaryName())
	if toolbuild.IsExecutable(bin) {
		return bin, nil
	}
	if p, err := l.lookPath("temporal"); err == nil {
		v, verr := cliVersion(ctx, p)
		switch {
		case verr != nil:
			l.progressf("ignoring %s: %v", p, verr)
		case !v.atLeast(1, 5):
			l.progressf("ignoring %s: version %s is older than 1.5.0", p, v)
		default:
			return filepath.Abs(p)
		}
	}
	if l.opts.NoBuild {
		return "", fmt.Errorf("%w: set TEMPORAL_CLI or put temporal 1.5.0 or newer on PATH", ErrCLINotFound)
	}
	root, err := l.moduleRoot()
	if err != nil {
		return "", err
	}
	return l.buildLocked(ctx, filepath.Join(root, "tools"), bin)
}

// moduleRoot finds the directory holding the tools/ module, walking up from
// the work directory and then from this package's source directory.
func (l *locator) moduleRoot() (string, error) {
	start := l.opts.WorkDir
	if start == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("reading the working directory: %w", err)
		}
		start = wd
	}
	for _, dir := range []string{start, l.sourceDir} {
		if dir == "" {
			continue
		}
		if root, ok := findToolsRoot(dir); ok {
			return root, nil
		}
	}
	return "", fmt.Errorf("%w: set TEMPORAL_CLI, put temporal 1.5.0 or newer on PATH, or run inside a sessionflow checkout so it can be built from tools/ (searched up from %s)", ErrCLINotFound, start)
}

// findToolsRoot walks up from dir to the first directory whose tools/go.mod
// declares the sessionflow tools module.
func findToolsRoot(dir string) (string, bool) { return toolbuild.FindRoot(dir) }

func isToolsModule(gomod string) bool { return toolbuild.IsToolsModule(gomod) }

// buildLocked builds the CLI into bin under the cache directory's lock,
// unless another caller built it while this one waited for the lock.
func (l *locator) buildLocked(ctx context.Context, toolsDir, bin string) (string, error) {
	b := &toolbuild.Build{
		Bin:           bin,
		Dir:           toolsDir,
		Run:           l.build,
		Progress:      l.opts.Progress,
		PollEvery:     l.pollEvery,
		ProgressEvery: l.progressEvery,
		OnWait:        l.onWait,
		Texts: toolbuild.Texts{
			CacheDir: "the CLI cache directory",
			OpenLock: "the CLI build lock",
			WaitLock: "the CLI build lock",
			Waiting:  "waiting for another process that is building the Temporal CLI (lock %s)…",
			Building: buildMessage,
			Still:    "still building the Temporal CLI (%s elapsed)…",
			Built:    "built the Temporal CLI in %s: %s",
			BuildFailed: func(err error) error {
				return fmt.Errorf("building the Temporal CLI in %s: %w", toolsDir, err)
			},
			InstallFailed: func(err error) error {
				return fmt.Errorf("installing the built Temporal CLI: %w", err)
			},
		},
	}
	return b.Locked(ctx)
}

// goBuild builds the CLI package of the tools module in toolsDir into out.
func goBuild(ctx context.Context, toolsDir, out string) error {
	return toolbuild.GoBuild(ctx, toolsDir, out, cliPackage,
		"-ldflags", "-X "+cliVersionVar+"="+strings.TrimPrefix(CLIVersion, "v"))
}

// semver is a parsed major.minor.patch version.
type semver struct{ major, minor, patch int }

func (v semver) String() string { return fmt.Sprintf("%d.%d.%d", v.major, v.minor, v.patch) }

func (v semver) atLeast(major, minor int) bool {
	return v.major > major || (v.major == major && v.minor >= minor)
}

var versionRE = regexp.MustCompile(`version v?(\d+)\.(\d+)\.(\d+)`)

// parseCLIVersion reads the version out of `temporal --version` output, e.g.
// "temporal version 1.5.1 (Server 1.29.1, UI 2.42.1)".
func parseCLIVersion(out string) (semver, error) {
	m := versionRE.FindStringSubmatch(out)
	if m == nil {
		return semver{}, fmt.Errorf("unrecognized --version output %q", strings.TrimSpace(out))
	}
	var v semver
	v.major, _ = strconv.Atoi(m[1])
	v.minor, _ = strconv.Atoi(m[2])
	v.patch, _ = strconv.Atoi(m[3])
	return v, nil
}

// cliVersion runs `<path> --version` and parses its output.
func cliVersion(ctx context.Context, path string) (semver, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return semver{}, fmt.Errorf("running %s --version: %w", path, err)
	}
	return parseCLIVersion(string(out))
}
