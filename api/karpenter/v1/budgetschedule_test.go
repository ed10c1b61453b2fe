package v1

import (
	"errors"
	"testing"
	"time"
)

func TestParseBudgetSchedule(t *testing.T) {
	tests := map[string]string{
		"0 9 * * mon-fri":                "",
		"*/15 * * * *":                   "",
		"@hourly":                        "",
		"@daily":                         "",
		"@midnight":                      "",
		"@weekly":                        "",
		"@monthly":                       "",
		"@yearly":                        "",
		"@annually":                      "",
		"":                               "empty spec string",
		"   ":                            "empty spec string",
		"0 9 * *":                        "expected exactly 5 fields, found 4",
		"0 0 9 * * *":                    "expected exactly 5 fields, found 6",
		"0 0 32 * *":                     "end of range (32) above maximum (31)",
		"a b c d e":                      "failed to parse int from a",
		"@fortnightly":                   "unrecognized descriptor",
		"@every 1h":                      "@every intervals are not supported; use a descriptor such as @daily",
		"TZ=UTC 0 9 * * *":               "time zones are not supported: schedules are evaluated in UTC",
		"CRON_TZ=Europe/Paris 0 9 * * *": "time zones are not supported: schedules are evaluated in UTC",
	}
	for in, want := range tests {
		sched, err := ParseBudgetSchedule(in)
		if want == "" {
			if err != nil || sched == nil {
				t.Errorf("ParseBudgetSchedule(%q) = (%v, %v), want a schedule", in, sched, err)
			}
			continue
		}
		se, ok := errors.AsType[*BudgetScheduleError](err)
		if !ok {
			t.Errorf("ParseBudgetSchedule(%q) error = %v, want a *BudgetScheduleError", in, err)
			continue
		}
		if se.Reason != want || se.Schedule != in {
			t.Errorf("ParseBudgetSchedule(%q) = %+v, want reason %q", in, se, want)
		}
	}
}

func TestParseBudgetScheduleIsUTC(t *testing.T) {
	sched, err := ParseBudgetSchedule("0 9 * * *")
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2025, time.June, 11, 0, 0, 0, 0, time.FixedZone("UTC-5", -5*3600))
	want := time.Date(2025, time.June, 11, 9, 0, 0, 0, time.UTC)
	if got := sched.Next(from); !got.Equal(want) {
		t.Errorf("Next(%s) = %s, want %s", from, got, want)
	}
}
