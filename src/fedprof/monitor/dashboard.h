#ifndef FEDPROF_MONITOR_DASHBOARD_H_
#define FEDPROF_MONITOR_DASHBOARD_H_

#include <string>

namespace fedprof {

// The monitor's live dashboard: one self-contained page that loads Chart.js
// from the monitor itself (/chart.js) and polls /dashboard.json. A bearer
// token, when the monitor wants one, comes in the page address's fragment
// (#token=...), which browsers never send to the server.
const std::string& DashboardHtml();

}  // namespace fedprof

#endif  // FEDPROF_MONITOR_DASHBOARD_H_
