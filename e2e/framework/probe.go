package framework

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// FreePort returns a TCP port that is free on the loopback interface when it returns (another
// process may take it before the caller binds it).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("pick a free port: not a TCP address")
	}
	return addr.Port, nil
}

// HTTPGet fetches url within 2 s and returns the status code and body; when the request fails,
// the code is 0 and the body the error.
func HTTPGet(url string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode, string(body)
}

// LeaderStatus returns the value of leader_election_master_status{name="<name>"} that the
// Prometheus endpoint at metricsURL exports ("1" for the leader, "0" for a follower), or "" when it
// cannot be read.
func LeaderStatus(metricsURL, name string) string {
	code, body := HTTPGet(metricsURL)
	if code != http.StatusOK {
		return ""
	}
	prefix := `leader_election_master_status{name="` + name + `"} `
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
