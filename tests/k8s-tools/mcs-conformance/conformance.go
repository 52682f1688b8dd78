//go:build tools

// Package tools names the package tests/k8s-tools/build.sh compiles the test binary of, so
// that go.mod and go.sum pin everything it needs.
package tools

import _ "sigs.k8s.io/mcs-api/conformance"
