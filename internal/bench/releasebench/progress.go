package releasebench

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Progress draws a one-line progress bar (redrawn with \r) of the current step and stage. A nil
// *Progress draws nothing, so code may report progress unconditionally.
type Progress struct {
	w     io.Writer
	mu    sync.Mutex
	step  string
	stage string
	total int
	done  int
	since time.Time
	drawn time.Time
	width int // of the last line, to blank it out
}

// NewProgress draws on w (usually os.Stderr).
func NewProgress(w io.Writer) *Progress { return &Progress{w: w} }

// SetStep names the measurement under way.
func (p *Progress) SetStep(step string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.step = step
}

// Stage starts a stage of total units (0: a stage without a count, drawn with its elapsed time).
func (p *Progress) Stage(stage string, total int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stage, p.total, p.done, p.since = stage, total, 0, time.Now()
	p.draw(true)
}

// Set reports done units of the stage.
func (p *Progress) Set(done int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = done
	p.draw(false)
}

// Finish ends the bar's line.
func (p *Progress) Finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.width > 0 {
		fmt.Fprint(p.w, "\r"+strings.Repeat(" ", p.width)+"\r")
		p.width = 0
	}
}

// draw redraws at most ten times a second, unless forced.
func (p *Progress) draw(force bool) {
	now := time.Now()
	if !force && now.Sub(p.drawn) < 100*time.Millisecond {
		return
	}
	p.drawn = now
	const barWidth = 24
	line := p.step + " " + p.stage
	if p.total > 0 {
		filled := min(barWidth, p.done*barWidth/p.total)
		line += fmt.Sprintf(" [%s%s] %d/%d", strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled), p.done, p.total)
	}
	line += fmt.Sprintf(" %.1fs", now.Sub(p.since).Seconds())
	pad := ""
	if len(line) < p.width {
		pad = strings.Repeat(" ", p.width-len(line))
	}
	fmt.Fprint(p.w, "\r"+line+pad)
	p.width = len(line)
}
