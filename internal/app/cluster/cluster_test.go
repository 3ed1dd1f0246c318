package cluster

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/deploy"
)

// TestServerVersionIsTheToolsPin: the launcher builds the server release
// tools/ pins, from the packages tools/ declares as tools.
func TestServerVersionIsTheToolsPin(t *testing.T) {
	tools, err := toolsDir("")
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(tools, "go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*go\.temporal\.io/server (v\S+)`).FindSubmatch(b)
	require.NotNil(t, m, "tools/go.mod requires go.temporal.io/server")
	require.Equal(t, "v1.29.1", string(m[1]))
	require.Equal(t, string(m[1]), ServerVersion)
	for _, pkg := range []string{ServerTool.Package, SQLTool.Package} {
		require.Regexp(t, `(?m)^\s*(tool )?`+regexp.QuoteMeta(pkg)+`$`, string(b), "tools/go.mod declares %s as a tool", pkg)
	}
}

func TestSearchAttributesEnv(t *testing.T) {
	require.Equal(t, "SessionCwd=Keyword SessionId=Keyword SessionPhase=Keyword", SearchAttributesEnv())
}

func TestLocatePrefersTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "my-server")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755))
	getenv := func(k string) string {
		if k == "TEMPORAL_SERVER" {
			return bin
		}
		return ""
	}
	got, err := Locate(context.Background(), ServerTool, BuildOptions{Getenv: getenv, CacheDir: t.TempDir()})
	require.NoError(t, err)
	require.Equal(t, bin, got)

	missing := func(k string) string {
		if k == "TEMPORAL_SQL_TOOL" {
			return filepath.Join(dir, "absent")
		}
		return ""
	}
	_, err = Locate(context.Background(), SQLTool, BuildOptions{Getenv: missing, CacheDir: t.TempDir()})
	require.ErrorContains(t, err, "TEMPORAL_SQL_TOOL=")
}

func TestLocateFindsTheCachedBuild(t *testing.T) {
	cache := t.TempDir()
	bin := filepath.Join(cache, "temporal-sql-tool-v1.29.1")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755))
	got, err := Locate(context.Background(), SQLTool, BuildOptions{Getenv: func(string) string { return "" }, CacheDir: cache})
	require.NoError(t, err)
	require.Equal(t, bin, got)
}

// TestDeployFilesWritten: the launcher runs with deploy's files, byte for
// byte.
func TestDeployFilesWritten(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, writeDeployFiles(dir))
	mod, err := ModuleDir("")
	require.NoError(t, err)
	for _, f := range []string{"temporal/config/docker.yaml", "dynamicconfig/sessionflow.yaml", "scripts/setup-schema.sh", "scripts/create-namespace.sh"} {
		want, err := os.ReadFile(filepath.Join(mod, "deploy", f))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), f)
	}
}

func TestIsUnder(t *testing.T) {
	require.True(t, isUnder("/a/b/c", "/a/b"))
	require.True(t, isUnder("/a/b", "/a/b"))
	require.False(t, isUnder("/a/bc", "/a/b"))
	require.False(t, isUnder("/tmp/x", "/a/b"))
}

// TestConfiguredInFlightUpdates: the launcher's check at start reads the
// limit deploy's dynamic config sets (the server's default is 10).
func TestConfiguredInFlightUpdates(t *testing.T) {
	src, err := deploy.Files.ReadFile(deploy.DynamicConfigFile)
	require.NoError(t, err)
	got, err := configuredInFlightUpdates(src)
	require.NoError(t, err)
	require.Equal(t, 64, got)

	_, err = configuredInFlightUpdates([]byte("history.maxInFlightUpdatePayloads:\n  - value: 1572864\n"))
	require.ErrorContains(t, err, "sets history.maxInFlightUpdates 0 times")
	_, err = configuredInFlightUpdates([]byte("history.maxInFlightUpdates:\n  - value: many\n"))
	require.ErrorContains(t, err, "history.maxInFlightUpdates is many, not a number")
	_, err = configuredInFlightUpdates([]byte("\t- : ["))
	require.ErrorContains(t, err, "parsing dynamicconfig/sessionflow.yaml")
}
