package v1

import (
	"fmt"
	"strings"

	"github.com/robfig/cron/v3"
)

// BudgetScheduleError is the error ParseBudgetSchedule returns for a schedule it does not accept.
//
// +kubebuilder:object:generate=false
type BudgetScheduleError struct {
	// Schedule is the rejected schedule.
	Schedule string
	// Reason says briefly why, without repeating the schedule, e.g.
	// "expected exactly 5 fields, found 4".
	Reason string
	// Err is the cron parser's error, if the parser rejected the schedule.
	Err error
}

// Error returns the schedule and the reason it is rejected.
func (e *BudgetScheduleError) Error() string {
	return fmt.Sprintf("%q is not a valid cron expression (%s)", e.Schedule, e.Reason)
}

// Unwrap returns the cron parser's error, if any.
func (e *BudgetScheduleError) Unwrap() error { return e.Err }

// ParseBudgetSchedule parses a budget schedule the way budgets evaluate it: in UTC, with 5 fields
// (minute hour day-of-month month day-of-week) or a descriptor such as @daily, through
// cron.ParseStandard("TZ=UTC " + schedule) as Karpenter does. It also rejects two forms that the
// CRD's pattern or Karpenter's parse rejects but would otherwise give a confusing message: @every
// intervals (which the CRD does not admit) and an explicit TZ= or CRON_TZ= time zone. Errors are
// *BudgetScheduleError.
func ParseBudgetSchedule(schedule string) (cron.Schedule, error) {
	trimmed := strings.TrimSpace(schedule)
	reject := func(reason string, err error) (cron.Schedule, error) {
		return nil, &BudgetScheduleError{Schedule: schedule, Reason: reason, Err: err}
	}
	switch {
	case trimmed == "":
		return reject("empty spec string", nil)
	case strings.HasPrefix(trimmed, "@every"):
		return reject("@every intervals are not supported; use a descriptor such as @daily", nil)
	case strings.HasPrefix(trimmed, "TZ=") || strings.HasPrefix(trimmed, "CRON_TZ="):
		return reject("time zones are not supported: schedules are evaluated in UTC", nil)
	}
	sched, err := cron.ParseStandard("TZ=UTC " + schedule)
	if err != nil {
		// robfig/cron appends the offending token or an inner error after ": "; the BudgetScheduleError
		// already quotes the whole schedule.
		reason, _, _ := strings.Cut(err.Error(), ": ")
		return reject(reason, err)
	}
	return sched, nil
}
