#ifndef FEDPROF_MONITOR_DASHBOARD_H_
#define FEDPROF_MONITOR_DASHBOARD_H_

#include <string>

namespace fedprof {

// The monitor's live dashboard: one self-contained page that loads Chart.js
// from the monitor itself (/chart.js) and polls /dashboard.json. A bearer
// token, when the monitor wants one, comes in the page address's fragment
// (#token=...), which browsers never send to the server.
const std::string& DashboardHtml();

// What every dashboard page's script shares: set(id, text), and a poll of
// /dashboard.json every 2 s, with the token of the page address's fragment,
// that hands each answer to the page's own render(d) and a failure to its
// element "error". A page ends its script with it.
const std::string& DashboardPollScript();

}  // namespace fedprof

#endif  // FEDPROF_MONITOR_DASHBOARD_H_
