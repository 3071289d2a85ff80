// Package promtext keeps counters and histograms and writes them, with
// gauges read at scrape time, in the Prometheus text exposition format
// (version 0.0.4). Every family has at most one label, from a set fixed
// when the family is made, so cardinality stays bounded.
//
// It stands in for the Prometheus client library, whose package
// initialisation (protobuf descriptors, procfs, expvar) every supervisor
// process paid at start, shims and brokers included, though only the
// daemon ever exports a metric.
package promtext

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Family is one metric family, written on a scrape.
type Family interface {
	Name() string
	write(b *bytes.Buffer)
}

// Write renders families sorted by name, the order a scraper expects.
func Write(fams ...Family) string {
	fams = slices.Clone(fams)
	slices.SortFunc(fams, func(a, b Family) int { return strings.Compare(a.Name(), b.Name()) })
	var b bytes.Buffer
	for _, f := range fams {
		f.write(&b)
	}
	return b.String()
}

// ContentType is the exposition's HTTP content type.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// CounterVec counts per value of its one label.
type CounterVec struct {
	name, help, label string
	mu                sync.Mutex
	v                 map[string]float64
}

// NewCounterVec makes a counter family whose series for each of values
// are written (at 0) before anything is counted.
func NewCounterVec(name, help, label string, values ...string) *CounterVec {
	c := &CounterVec{name: name, help: help, label: label, v: map[string]float64{}}
	for _, v := range values {
		c.v[v] = 0
	}
	return c
}

func (c *CounterVec) Name() string { return c.name }

// Add adds n (≥ 0) to value's series.
func (c *CounterVec) Add(value string, n float64) {
	if n < 0 || math.IsNaN(n) {
		return // a counter only goes up
	}
	c.mu.Lock()
	c.v[value] += n
	c.mu.Unlock()
}

// Inc adds 1 to value's series.
func (c *CounterVec) Inc(value string) { c.Add(value, 1) }

func (c *CounterVec) write(b *bytes.Buffer) {
	c.mu.Lock()
	v := make(map[string]float64, len(c.v))
	for k, n := range c.v {
		v[k] = n
	}
	c.mu.Unlock()
	header(b, c.name, c.help, "counter")
	for _, k := range sortedKeys(v) {
		sample(b, c.name, c.label, k, "", "", v[k])
	}
}

// HistogramVec observes durations (or any value) into fixed buckets, per
// value of its one label.
type HistogramVec struct {
	name, help, label string
	buckets           []float64
	mu                sync.Mutex
	s                 map[string]*histogram
}

type histogram struct {
	counts []uint64 // per bucket, not cumulative
	sum    float64
	n      uint64
}

// NewHistogramVec makes a histogram family with upper bounds buckets
// (ascending; +Inf is implied) whose series for each of values are
// written before anything is observed.
func NewHistogramVec(name, help, label string, buckets []float64, values ...string) *HistogramVec {
	h := &HistogramVec{name: name, help: help, label: label, buckets: slices.Clone(buckets), s: map[string]*histogram{}}
	slices.Sort(h.buckets)
	for _, v := range values {
		h.s[v] = &histogram{counts: make([]uint64, len(h.buckets))}
	}
	return h
}

func (h *HistogramVec) Name() string { return h.name }

// Observe records x in value's series.
func (h *HistogramVec) Observe(value string, x float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.s[value]
	if s == nil {
		s = &histogram{counts: make([]uint64, len(h.buckets))}
		h.s[value] = s
	}
	if i, _ := slices.BinarySearch(h.buckets, x); i < len(h.buckets) {
		s.counts[i]++
	}
	s.sum += x
	s.n++
}

func (h *HistogramVec) write(b *bytes.Buffer) {
	h.mu.Lock()
	s := make(map[string]histogram, len(h.s))
	for k, v := range h.s {
		s[k] = histogram{counts: slices.Clone(v.counts), sum: v.sum, n: v.n}
	}
	h.mu.Unlock()
	header(b, h.name, h.help, "histogram")
	for _, k := range sortedKeys(s) {
		var cum uint64
		for i, le := range h.buckets {
			cum += s[k].counts[i]
			sample(b, h.name+"_bucket", h.label, k, "le", formatFloat(le), float64(cum))
		}
		sample(b, h.name+"_bucket", h.label, k, "le", "+Inf", float64(s[k].n))
		sample(b, h.name+"_sum", h.label, k, "", "", s[k].sum)
		sample(b, h.name+"_count", h.label, k, "", "", float64(s[k].n))
	}
}

// Gauge is a gauge family read at scrape time: one series per key of
// Values under Label, or, with Label empty, the single series Values[""].
type Gauge struct {
	Metric, Help, Label string
	Values              map[string]float64
}

func (g Gauge) Name() string { return g.Metric }

func (g Gauge) write(b *bytes.Buffer) {
	header(b, g.Metric, g.Help, "gauge")
	for _, k := range sortedKeys(g.Values) {
		sample(b, g.Metric, g.Label, k, "", "", g.Values[k])
	}
}

func header(b *bytes.Buffer, name, help, typ string) {
	b.WriteString("# HELP ")
	b.WriteString(name)
	b.WriteByte(' ')
	b.WriteString(helpEscaper.Replace(help))
	b.WriteString("\n# TYPE ")
	b.WriteString(name)
	b.WriteByte(' ')
	b.WriteString(typ)
	b.WriteByte('\n')
}

// sample writes one line: name, the label pair (when label is not
// empty) and a second one (le of a bucket), and the value.
func sample(b *bytes.Buffer, name, label, value, label2, value2 string, x float64) {
	b.WriteString(name)
	if label != "" || label2 != "" {
		b.WriteByte('{')
		if label != "" {
			pair(b, label, value)
			if label2 != "" {
				b.WriteByte(',')
			}
		}
		if label2 != "" {
			pair(b, label2, value2)
		}
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(formatFloat(x))
	b.WriteByte('\n')
}

func pair(b *bytes.Buffer, label, value string) {
	b.WriteString(label)
	b.WriteString(`="`)
	b.WriteString(valueEscaper.Replace(value))
	b.WriteByte('"')
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	valueEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func formatFloat(x float64) string {
	switch {
	case math.IsInf(x, 1):
		return "+Inf"
	case math.IsInf(x, -1):
		return "-Inf"
	case math.IsNaN(x):
		return "NaN"
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
