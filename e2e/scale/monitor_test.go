package scale_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/joiner-dev/joiner/e2e/framework"
)

// clockTicks is the kernel's USER_HZ, the unit of utime and stime in /proc/PID/stat (100 on every
// Linux architecture Go supports).
const clockTicks = 100

// monitor samples Joiner's resident set (/proc/PID/status VmRSS) every 500 ms and its Go heap in
// use (go_memstats_heap_inuse_bytes on its metrics endpoint) every 2 s, and keeps the peaks since
// the last takePeaks.
type monitor struct {
	pid        int
	metricsURL string
	stopCh     chan struct{}
	done       sync.WaitGroup

	mu                 sync.Mutex
	rss, heap          uint64
	rssPeak, heapPeak  uint64
	readErr, scrapeErr error
}

func startMonitor(pid int, metricsURL string) *monitor {
	m := &monitor{pid: pid, metricsURL: metricsURL, stopCh: make(chan struct{})}
	m.done.Add(1)
	go m.loop()
	return m
}

func (m *monitor) loop() {
	defer m.done.Done()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		rss, err := readRSS(m.pid)
		m.mu.Lock()
		m.readErr = err
		if err == nil {
			m.rss, m.rssPeak = rss, max(m.rssPeak, rss)
		}
		m.mu.Unlock()
		if i%4 == 0 {
			heap, err := scrapeSum(m.metricsURL, "go_memstats_heap_inuse_bytes", nil)
			m.mu.Lock()
			m.scrapeErr = err
			if err == nil {
				m.heap, m.heapPeak = uint64(heap), max(m.heapPeak, uint64(heap))
			}
			m.mu.Unlock()
		}
		select {
		case <-m.stopCh:
			return
		case <-tick.C:
		}
	}
}

// takePeaks returns the peak RSS and heap since the last call, and starts new peaks at the current
// values.
func (m *monitor) takePeaks() (rss, heap uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rss, heap = m.rssPeak, m.heapPeak
	m.rssPeak, m.heapPeak = m.rss, m.heap
	return rss, heap
}

// current returns the last RSS and heap sampled, and the last error of each source.
func (m *monitor) current() (rss, heap uint64, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.readErr != nil {
		return m.rss, m.heap, m.readErr
	}
	return m.rss, m.heap, m.scrapeErr
}

func (m *monitor) stop() {
	close(m.stopCh)
	m.done.Wait()
}

// readRSS returns VmRSS of the process in bytes.
func readRSS(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read the resident set: %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmRSS %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// cpuTime returns the user plus system CPU time the process has used (/proc/PID/stat).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read the CPU time: %w", err)
	}
	// The command name (field 2) may hold spaces; the fields after it are fixed: utime and stime
	// are fields 14 and 15, the 12th and 13th after the closing parenthesis.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat has %d fields after the command name, want at least 13", pid, len(fields))
	}
	var ticks uint64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// loadAverage returns the one-minute load average of the machine, as uptime prints it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// sample is one line of the Prometheus text format: a metric name, its labels and value.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads every sample of the Prometheus text endpoint at url.
func scrape(url string) ([]sample, error) {
	code, body := framework.HTTPGet(url)
	if code != 200 {
		return nil, fmt.Errorf("GET %s: status %d", url, code)
	}
	var out []sample
	for line := range strings.SplitSeq(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		s := sample{name: line[:sp], labels: map[string]string{}, value: v}
		if i := strings.IndexByte(s.name, '{'); i >= 0 {
			s.labels = parseLabels(s.name[i+1 : len(s.name)-1])
			s.name = s.name[:i]
		}
		out = append(out, s)
	}
	return out, nil
}

// parseLabels parses `a="x",b="y"` (label values holding no quotes, as the ones read here).
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || len(s) < eq+2 {
			break
		}
		rest := s[eq+2:]
		end := strings.IndexByte(rest, '"')
		if end < 0 {
			break
		}
		out[s[:eq]] = rest[:end]
		s = strings.TrimPrefix(rest[end+1:], ",")
	}
	return out
}

// scrapeSum sums the samples of the metric name at url whose labels pass keep (nil keeps all).
func scrapeSum(url, name string, keep func(map[string]string) bool) (float64, error) {
	samples, err := scrape(url)
	if err != nil {
		return 0, err
	}
	total, found := 0.0, false
	for _, s := range samples {
		if s.name == name && (keep == nil || keep(s.labels)) {
			total += s.value
			found = true
		}
	}
	if !found && keep == nil {
		return 0, fmt.Errorf("%s does not export %s", url, name)
	}
	return total, nil
}

// apiCounts are Joiner's API requests so far (rest_client_requests_total): writes (POST, PUT,
// PATCH, DELETE) and conflicts (409).
type apiCounts struct{ writes, conflicts float64 }

func readAPICounts(url string) (apiCounts, error) {
	samples, err := scrape(url)
	if err != nil {
		return apiCounts{}, err
	}
	var c apiCounts
	found := false
	for _, s := range samples {
		if s.name != "rest_client_requests_total" {
			continue
		}
		found = true
		switch s.labels["method"] {
		case "POST", "PUT", "PATCH", "DELETE":
			c.writes += s.value
		}
		if s.labels["code"] == "409" {
			c.conflicts += s.value
		}
	}
	if !found {
		return c, fmt.Errorf("%s does not export rest_client_requests_total", url)
	}
	return c, nil
}
