#include "report/html_report.h"
#include "base/text_format.h"
#include "diagnose/wording.h"
#include "report/diagnosis_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "cause/cause_text.h"
#include "report/perfetto_export.h"
#include "report/text_report.h"
#include "slice/causal_slice.h"

namespace teller::report {
namespace {

using diagnose::Diagnosis;
using diagnose::Finding;
using model::NodeIndex;

// Timeline geometry (SVG user units; the SVG scales to the page width).
constexpr double kSvgWidth = 1200.0;
constexpr double kLabelWidth = 118.0;
constexpr double kPlotLeft = 124.0;
constexpr double kPlotWidth = kSvgWidth - kPlotLeft - 8.0;
constexpr double kRowHeight = 13.0;
constexpr double kLanePad = 5.0;
constexpr double kAxisHeight = 22.0;
constexpr size_t kMaxRowsPerLane = 6;
constexpr size_t kMaxStepRows = 12;

constexpr std::string_view kCss = R"css(
:root{--bg:#fbfbfc;--fg:#1b1d22;--muted:#5d6470;--card:#ffffff;--line:#d9dce2;--accent:#2f5fd0;
--bad:#c62828;--bad-bg:#fde8e8;--ok:#2e7d32;--ok-bg:#e6f4e7;--warn:#9a6700;--lane:#f1f3f6;
--suspect:#e0193a;--slow:#b3261e}
@media (prefers-color-scheme:dark){:root{--bg:#15171b;--fg:#e4e6eb;--muted:#9aa2ae;
--card:#1e2127;--line:#343944;--accent:#7aa2ff;--bad:#ff6b6b;--bad-bg:#3a1d1f;--ok:#7bd88f;
--ok-bg:#1c3322;--warn:#e3b341;--lane:#23272e;--suspect:#ff3d5a;--slow:#ff8a80}
}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:1320px;margin:0 auto;padding:16px 20px 40px}
h1{font-size:20px;margin:4px 0 2px}
h2{font-size:17px;margin:0 0 8px}
h3{font-size:15px;margin:14px 0 6px}
section{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:14px 16px;
margin:14px 0}
.muted{color:var(--muted)}
.mono,code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
nav a{color:var(--accent);margin-right:12px;text-decoration:none}
nav{font-size:13px}
.badge{display:inline-block;padding:2px 10px;border-radius:12px;font-weight:700;
letter-spacing:.03em}
.badge.abnormal{background:var(--bad-bg);color:var(--bad)}
.badge.normal{background:var(--ok-bg);color:var(--ok)}
.badge.undetermined{background:var(--lane);color:var(--muted)}
.facts{display:grid;grid-template-columns:repeat(auto-fit,minmax(230px,1fr));gap:8px 18px;
margin:10px 0}
.fact>b{display:block;font-size:12px;color:var(--muted);font-weight:600;
text-transform:uppercase;letter-spacing:.04em}
.fact>span{font-size:15px}
.example{margin:4px 0 0}
.callout{border-left:4px solid var(--accent);padding:6px 12px;margin:8px 0;
background:var(--lane);border-radius:0 6px 6px 0}
.callout.next{border-left-color:var(--warn)}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{color:var(--muted);font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.scroll{overflow-x:auto}
svg.timeline{width:100%;height:auto;display:block;background:var(--card)}
svg.timeline text{fill:var(--muted);font:11px system-ui,sans-serif}
svg.timeline .lane{fill:var(--lane)}
svg.timeline .tick{stroke:var(--line);stroke-width:1}
svg.timeline rect.n{stroke:none;opacity:.85}
svg.timeline rect.n:hover,svg.timeline rect.hl{opacity:1;stroke:var(--fg);stroke-width:1.5}
svg.timeline rect.n.peer{opacity:.55}
svg.timeline rect.n.suspect{fill:var(--suspect);opacity:1;stroke:var(--fg);stroke-width:2}
.L0{fill:#7b8794}
.L1{fill:#4f7fd6}
.L2{fill:#3aa0a0}
.L3{fill:#c28a1e}
.L4{fill:#a57c52}
.L5{fill:#6d5bd0}
.L6{fill:#2e9e5b}
.L7{fill:#d45d9b}
.L8{fill:#9c7b2f}
.L9{fill:#8a8f98}
.legend span{display:inline-block;margin-right:12px;font-size:12px}
.legend i{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:4px;
vertical-align:-1px}
.legend i.L0{background:#7b8794}
.legend i.L1{background:#4f7fd6}
.legend i.L2{background:#3aa0a0}
.legend i.L3{background:#c28a1e}
.legend i.L4{background:#a57c52}
.legend i.L5{background:#6d5bd0}
.legend i.L6{background:#2e9e5b}
.legend i.L7{background:#d45d9b}
.legend i.L8{background:#9c7b2f}
.legend i.L9{background:#8a8f98}
.legend i.sus{background:var(--suspect);outline:2px solid var(--fg)}
ul.tree,ul.tree ul{list-style:none;margin:0;padding-left:18px}
ul.tree{padding-left:0;font-size:13px}
ul.tree li{margin:1px 0;border-left:1px dotted var(--line);padding-left:6px}
ul.tree .node{padding:0 4px;border-radius:4px}
ul.tree .node.hl{background:var(--lane);outline:1px solid var(--accent)}
ul.tree .node.suspect{background:var(--bad-bg);color:var(--bad);font-weight:600;
outline:2px solid var(--suspect)}
.layer{display:inline-block;min-width:44px;font-size:11px;font-weight:700;color:var(--muted)}
.dur{color:var(--muted)}
.slow{color:var(--slow);font-weight:600}
.cut{color:var(--warn);font-size:12.5px}
td.logtext{white-space:pre-wrap;word-break:break-word}
.handoff{border:1px dashed var(--line);border-radius:6px;padding:6px 12px;margin:8px 0}
button.perfetto-open{font:inherit;font-size:12px;padding:1px 8px;cursor:pointer}
)css";

// Records load errors and console errors in <html data-errors>, so a headless
// browser's dumped DOM shows them; hover links timeline bars and tree items.
constexpr std::string_view kScript = R"js(
(function(){
var root=document.documentElement,errors=0;
function note(){errors++;root.setAttribute('data-errors',String(errors));}
window.addEventListener('error',note);
var consoleError=console.error;
console.error=function(){note();return consoleError.apply(console,arguments);};
function mark(target,on){
 if(!target||!target.closest)return;var el=target.closest('[data-node]');if(!el)return;
 var box=el.closest('section');if(!box)return;var id=el.getAttribute('data-node');
 box.querySelectorAll('[data-node="'+id+'"]').forEach(function(x){x.classList.toggle('hl',on);});
}
document.addEventListener('mouseover',function(e){mark(e.target,true);});
document.addEventListener('mouseout',function(e){mark(e.target,false);});
document.addEventListener('DOMContentLoaded',function(){
 root.setAttribute('data-ready','1');
 root.setAttribute('data-suspects',String(document.querySelectorAll('[data-suspect="1"]').length));
});
})();
)js";

// The Perfetto hand-off, included only with an export. Runs on a click only: opens
// ui.perfetto.dev (window.open is a navigation, not a fetch), waits for its PONG,
// posts the export the reader picked and the window to zoom to (postMessage API of
// the Perfetto UI: {perfetto:{buffer,title}}, then {perfetto:{timeStart,timeEnd}} in
// seconds of trace time; the URL also carries visStart/visEnd in ns).
constexpr std::string_view kPerfettoScript = R"js(
(function(){
var UI='https://ui.perfetto.dev',trace=null,traceName='';
function el(id){return document.getElementById(id);}
function say(t){var s=el('perfetto-status');if(s)s.textContent=t;}
function send(win,startNs,endNs){
 var tries=0,timer=setInterval(function(){
  if(++tries>600){clearInterval(timer);window.removeEventListener('message',onMessage);
   say('ui.perfetto.dev did not answer within a minute (offline?). Open the export there by hand and go to the window shown.');return;}
  try{win.postMessage('PING',UI);}catch(e){}
 },100);
 function zoom(){win.postMessage({perfetto:{timeStart:startNs/1e9,timeEnd:endNs/1e9,viewPercentage:0.9}},UI);}
 function onMessage(e){
  if(e.source!==win||e.data!=='PONG')return;
  clearInterval(timer);window.removeEventListener('message',onMessage);
  win.postMessage({perfetto:{buffer:trace,title:traceName,fileName:traceName,keepApiOpen:true}},UI);
  zoom();setTimeout(zoom,8000);
  say('Sent '+traceName+' to ui.perfetto.dev. If it asks whether to open a trace from an unknown origin, answer Yes.');
 }
 window.addEventListener('message',onMessage);
}
document.addEventListener('DOMContentLoaded',function(){
 var input=el('perfetto-file');if(!input)return;
 input.addEventListener('change',function(){
  var f=input.files&&input.files[0];if(!f)return;
  var reader=new FileReader();
  reader.onload=function(){trace=reader.result;traceName=f.name;say('Loaded '+f.name+': click a step\'s button to open it at that window.');};
  reader.onerror=function(){say('Could not read '+f.name+'.');};
  reader.readAsArrayBuffer(f);
 });
 document.querySelectorAll('button.perfetto-open').forEach(function(b){
  b.addEventListener('click',function(){
   if(!trace){say('First pick the Perfetto export file above (the browser cannot read it from disk by itself).');input.focus();return;}
   var startNs=Number(b.getAttribute('data-start-ns')),endNs=Number(b.getAttribute('data-end-ns'));
   var win=window.open(UI+'/#!/?visStart='+startNs+'&visEnd='+endNs,'_blank');
   if(!win){say('The browser blocked the new tab: allow pop-ups for this page and click again.');return;}
   send(win,startNs,endNs);
  });
 });
});
})();
)js";

std::string E(std::string_view text) { return EscapeHtml(text); }

struct NodeView {
  const model::Trace& trace;
  model::EventRow Event(NodeIndex node) const { return trace.nodes.event[node.value()]; }
  model::Layer Layer(NodeIndex node) const { return trace.events.layer[Event(node).value()]; }
  std::string_view Name(NodeIndex node) const {
    return trace.str(trace.events.name[Event(node).value()]);
  }
  model::TimeNs Start(NodeIndex node) const { return trace.events.start_ns[Event(node).value()]; }
  int64_t Dur(NodeIndex node) const { return trace.events.dur_ns[Event(node).value()]; }
  int32_t Rank(NodeIndex node) const {
    const model::StepIndex step = trace.nodes.step[node.value()];
    return step.valid() ? trace.steps.rank[step.value()] : -1;
  }
};

// Median duration of every (layer, name) among the nodes drawn: the "normal" of a node.
class NameMedians {
 public:
  void Want(const NodeView& view, NodeIndex node) { wanted_.insert(Key(view, node)); }
  void Compute(const NodeView& view) {
    std::unordered_map<uint64_t, std::vector<int64_t>> durations;
    for (size_t i = 0; i < view.trace.nodes.size(); ++i) {
      const uint64_t key = Key(view, NodeIndex(static_cast<uint32_t>(i)));
      if (wanted_.count(key))
        durations[key].push_back(view.Dur(NodeIndex(static_cast<uint32_t>(i))));
    }
    for (auto& [key, values] : durations) {
      std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
      medians_[key] = {values[values.size() / 2], static_cast<int64_t>(values.size())};
    }
  }
  // {median, samples}; samples 0 when unknown.
  std::pair<int64_t, int64_t> Get(const NodeView& view, NodeIndex node) const {
    auto it = medians_.find(Key(view, node));
    return it == medians_.end() ? std::pair<int64_t, int64_t>{0, 0} : it->second;
  }

 private:
  static uint64_t Key(const NodeView& view, NodeIndex node) {
    const model::EventRow event = view.Event(node);
    return (uint64_t{view.trace.events.name[event.value()].value()} << 8) |
           static_cast<uint64_t>(view.trace.events.layer[event.value()]);
  }
  std::unordered_set<uint64_t> wanted_;
  std::unordered_map<uint64_t, std::pair<int64_t, int64_t>> medians_;
};

// The nodes of a finding that are drawn: suspects, then peers, then the rest by
// relevance (ties: the earlier node), at most `limit`; returned in node order.
struct DrawnSet {
  std::vector<NodeIndex> own;    // the step's nodes, ascending
  std::vector<NodeIndex> peers;  // other ranks' collectives, ascending
  size_t total = 0;              // slice nodes + peer nodes
};

DrawnSet SelectNodes(const Finding& finding, size_t limit) {
  const slice::StepSlice& slice = finding.slice;
  const std::unordered_set<uint32_t> suspects = [&] {
    std::unordered_set<uint32_t> out;
    for (NodeIndex node : finding.suspects) out.insert(node.value());
    return out;
  }();
  struct Candidate {
    int group;  // 0 suspect, 1 peer, 2 other
    float relevance;
    NodeIndex node;
    bool peer;
  };
  std::vector<Candidate> candidates;
  for (size_t i = 0; i < slice.nodes.size(); ++i) {
    const bool suspect = suspects.count(slice.nodes[i].value()) > 0;
    candidates.push_back({suspect ? 0 : 2, i < slice.relevance.size() ? slice.relevance[i] : 0.f,
                          slice.nodes[i], false});
  }
  for (NodeIndex node : slice.peer_nodes) candidates.push_back({1, 0.f, node, true});
  DrawnSet out;
  out.total = candidates.size();
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) {
                     if (a.group != b.group) return a.group < b.group;
                     if (a.relevance != b.relevance) return a.relevance > b.relevance;
                     return a.node.value() < b.node.value();
                   });
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (i >= limit && candidates[i].group != 0) continue;
    (candidates[i].peer ? out.peers : out.own).push_back(candidates[i].node);
  }
  auto by_index = [](NodeIndex a, NodeIndex b) { return a.value() < b.value(); };
  std::sort(out.own.begin(), out.own.end(), by_index);
  std::sort(out.peers.begin(), out.peers.end(), by_index);
  return out;
}

std::string NodeTitle(const NodeView& view, NodeIndex node, model::TimeNs t0) {
  return E(fmt::format("{} {}\n{} (starts +{}), rank {}", model::LayerName(view.Layer(node)),
                       view.Name(node), base::FormatDuration(view.Dur(node)),
                       base::FormatDuration(view.Start(node) - t0), view.Rank(node)));
}

std::string Timeline(const NodeView& view, const Finding& finding, const DrawnSet& drawn,
                     const std::unordered_set<uint32_t>& suspects) {
  std::vector<NodeIndex> nodes = drawn.own;
  nodes.insert(nodes.end(), drawn.peers.begin(), drawn.peers.end());
  const std::unordered_set<uint32_t> peers = [&] {
    std::unordered_set<uint32_t> out;
    for (NodeIndex node : drawn.peers) out.insert(node.value());
    return out;
  }();
  if (nodes.empty()) return "<p class=\"muted\">No slice nodes.</p>\n";
  // The window: the nodes kept for more than being a caller of a suspect (an enclosing
  // range spans the step and says nothing about where the slice is); callers are clipped.
  std::unordered_set<uint32_t> ancestors_only;
  for (size_t i = 0; i < finding.slice.nodes.size() && i < finding.slice.reasons.size(); ++i) {
    if (finding.slice.reasons[i] == slice::kReasonAncestor) {
      ancestors_only.insert(finding.slice.nodes[i].value());
    }
  }
  model::TimeNs t0 = INT64_MAX, t1 = INT64_MIN;
  for (int pass = 0; pass < 2 && t0 > t1; ++pass) {
    for (NodeIndex node : nodes) {
      if (pass == 0 && ancestors_only.count(node.value())) continue;
      t0 = std::min(t0, view.Start(node));
      t1 = std::max(t1, view.Start(node) + std::max<int64_t>(view.Dur(node), 0));
    }
  }
  const double span = static_cast<double>(std::max<int64_t>(t1 - t0, 1));
  // Lanes: (rank, layer), ranks ascending, layers in stack order.
  std::map<std::pair<int32_t, int>, std::vector<NodeIndex>> lanes;
  std::set<int32_t> ranks;
  for (NodeIndex node : nodes) {
    lanes[{view.Rank(node), static_cast<int>(view.Layer(node))}].push_back(node);
    ranks.insert(view.Rank(node));
  }
  struct Placed {
    NodeIndex node;
    double y;
  };
  std::vector<Placed> placed;
  std::string lanes_svg;
  double y = kAxisHeight;
  for (auto& [key, members] : lanes) {
    std::stable_sort(members.begin(), members.end(), [&](NodeIndex a, NodeIndex b) {
      if (view.Start(a) != view.Start(b)) return view.Start(a) < view.Start(b);
      return view.Dur(a) > view.Dur(b);
    });
    std::vector<model::TimeNs> row_end;
    for (NodeIndex node : members) {
      size_t row = row_end.size();
      for (size_t r = 0; r < row_end.size(); ++r) {
        if (row_end[r] <= view.Start(node)) {
          row = r;
          break;
        }
      }
      if (row == row_end.size() && row_end.size() >= kMaxRowsPerLane) {
        row =
            static_cast<size_t>(std::min_element(row_end.begin(), row_end.end()) - row_end.begin());
      }
      if (row == row_end.size()) row_end.push_back(0);
      row_end[row] = std::max(row_end[row], view.Start(node) + view.Dur(node));
      placed.push_back({node, y + kLanePad / 2 + row * kRowHeight});
    }
    const double height = row_end.size() * kRowHeight + kLanePad;
    const std::string label =
        ranks.size() > 1 ? fmt::format("rank {} {}", key.first,
                                       model::LayerName(static_cast<model::Layer>(key.second)))
                         : std::string(model::LayerName(static_cast<model::Layer>(key.second)));
    lanes_svg += fmt::format(
        "<rect class=\"lane\" x=\"0\" y=\"{:.1f}\" width=\"{:.0f}\" height=\"{:.1f}\"/>"
        "<text x=\"6\" y=\"{:.1f}\">{}</text>\n",
        y, kSvgWidth, height - 1, y + std::min(height, kRowHeight + kLanePad) / 2 + 4, E(label));
    y += height;
  }
  const double total_height = y + 4;
  std::string out = fmt::format(
      "<svg class=\"timeline\" viewBox=\"0 0 {:.0f} {:.0f}\" role=\"img\" "
      "aria-label=\"timeline of the slice of rank {} step {}\">\n",
      kSvgWidth, total_height, finding.rank, finding.step_number);
  // Axis: five ticks, times relative to the first drawn node.
  for (int i = 0; i <= 4; ++i) {
    const double x = kPlotLeft + kPlotWidth * i / 4.0;
    out += fmt::format(
        "<line class=\"tick\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>"
        "<text x=\"{:.1f}\" y=\"14\" text-anchor=\"{}\">+{}</text>\n",
        x, kAxisHeight - 4, x, total_height, x,
        i == 0   ? "start"
        : i == 4 ? "end"
                 : "middle",
        base::FormatDuration(static_cast<int64_t>(span * i / 4.0)));
  }
  out += lanes_svg;
  // Suspects last, so they are drawn on top.
  std::stable_partition(placed.begin(), placed.end(),
                        [&](const Placed& p) { return !suspects.count(p.node.value()); });
  for (const Placed& p : placed) {
    const bool suspect = suspects.count(p.node.value()) > 0;
    const model::TimeNs start = std::clamp(view.Start(p.node), t0, t1);
    const model::TimeNs end =
        std::clamp(view.Start(p.node) + std::max<int64_t>(view.Dur(p.node), 0), t0, t1);
    const double x = kPlotLeft + (start - t0) * kPlotWidth / span;
    const double w = std::max(suspect ? 3.0 : 1.0, (end - start) * kPlotWidth / span);
    out += fmt::format(
        "<rect class=\"n L{}{}{}\" data-node=\"{}\"{} x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
        "height=\"{:.1f}\" rx=\"2\"><title>{}{}</title></rect>\n",
        static_cast<int>(view.Layer(p.node)), suspect ? " suspect" : "",
        peers.count(p.node.value()) ? " peer" : "", p.node.value(),
        suspect ? " data-suspect=\"1\"" : "", x, p.y, w, kRowHeight - 2, suspect ? "SUSPECT: " : "",
        NodeTitle(view, p.node, t0));
  }
  out += "</svg>\n";
  return out;
}

std::string Legend(const std::vector<NodeIndex>& nodes, const NodeView& view) {
  std::set<int> layers;
  for (NodeIndex node : nodes) layers.insert(static_cast<int>(view.Layer(node)));
  std::string out = "<p class=\"legend\">";
  for (int layer : layers) {
    out += fmt::format("<span><i class=\"L{}\"></i>{}</span>", layer,
                       model::LayerName(static_cast<model::Layer>(layer)));
  }
  out += "<span><i class=\"sus\"></i>suspect</span></p>\n";
  return out;
}

void TreeItem(const NodeView& view, NodeIndex node,
              const std::unordered_map<uint32_t, std::vector<NodeIndex>>& children,
              const std::unordered_set<uint32_t>& suspects, const NameMedians& medians,
              std::string* out) {
  const bool suspect = suspects.count(node.value()) > 0;
  const int64_t dur = view.Dur(node);
  const auto [median, samples] = medians.Get(view, node);
  std::string normal;
  if (samples >= 3) {
    const bool slow = median > 0 && dur > median * 3 / 2;
    normal = fmt::format(" <span class=\"{}\">(normal {} over {})</span>", slow ? "slow" : "dur",
                         base::FormatDuration(median), samples);
  }
  *out += fmt::format(
      "<li><span class=\"node{}\" data-node=\"{}\"{}><span class=\"layer\">{}</span> "
      "<span class=\"mono\">{}</span> <b>{}</b>{}</span>",
      suspect ? " suspect" : "", node.value(), suspect ? " data-suspect=\"1\"" : "",
      model::LayerName(view.Layer(node)), E(view.Name(node)), base::FormatDuration(dur), normal);
  auto it = children.find(node.value());
  if (it != children.end()) {
    *out += "<ul>";
    for (NodeIndex child : it->second) TreeItem(view, child, children, suspects, medians, out);
    *out += "</ul>";
  }
  *out += "</li>\n";
}

std::string Tree(const NodeView& view, const std::vector<NodeIndex>& nodes,
                 const std::unordered_set<uint32_t>& suspects, const NameMedians& medians) {
  std::unordered_set<uint32_t> in_set;
  for (NodeIndex node : nodes) in_set.insert(node.value());
  std::unordered_map<uint32_t, std::vector<NodeIndex>> children;
  std::vector<NodeIndex> roots;
  for (NodeIndex node : nodes) {  // ascending = pre-order, so children keep their order
    NodeIndex parent = view.trace.nodes.parent[node.value()];
    while (parent.valid() && !in_set.count(parent.value())) {
      parent = view.trace.nodes.parent[parent.value()];
    }
    if (parent.valid()) {
      children[parent.value()].push_back(node);
    } else {
      roots.push_back(node);
    }
  }
  std::string out = "<ul class=\"tree\">\n";
  for (NodeIndex root : roots) TreeItem(view, root, children, suspects, medians, &out);
  out += "</ul>\n";
  return out;
}

std::string LogRow(const model::Trace& trace, size_t row, std::string_view rule,
                   std::string_view category) {
  const model::StepIndex step = trace.logs.step[row];
  const model::TimeNs ts = trace.logs.ts_ns[row];
  const model::TemplateId tmpl = trace.logs.template_id[row];
  std::string template_text;
  if (tmpl.valid() && tmpl.value() < trace.templates.size()) {
    template_text = E(trace.str(trace.templates.pattern[tmpl.value()]));
  }
  return fmt::format(
      "<tr><td class=\"mono\">{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}</td>"
      "<td class=\"mono\">{}:{}</td><td>{}</td><td class=\"logtext mono\">{}</td>"
      "<td class=\"logtext mono muted\">{}</td></tr>\n",
      ts == INT64_MIN ? "-" : base::FormatUtcClock(ts), trace.logs.rank[row],
      model::LogLevelName(trace.logs.level[row]),
      step.valid() ? std::to_string(trace.steps.number[step.value()]) : "-",
      E(trace.str(trace.logs.source[row])), trace.logs.line_number[row],
      rule.empty() ? "" : E(fmt::format("{} ({})", rule, category)),
      E(trace.str(trace.logs.text[row])), template_text);
}

std::string Fact(std::string_view label, std::string_view html_value) {
  return fmt::format("<div class=\"fact\"><b>{}</b><span>{}</span></div>\n", label, html_value);
}

}  // namespace

std::string EscapeHtml(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') {
          out += ' ';
        } else if (c == 0x7f) {
          out += ' ';
        } else {
          out += c;
        }
    }
  }
  return out;
}

namespace {

// The headline badge: diagnose::VerdictOf decides the verdict, this only renders it.
std::string StatusParagraph(const Diagnosis& diagnosis) {
  std::string status_class = "abnormal", status, headline;
  switch (diagnose::VerdictOf(diagnosis)) {
    case diagnose::RunVerdict::kDegraded:
      status = "DEGRADED";
      headline = diagnosis.causes.empty()
                     ? fmt::format("Category <b>{}</b> from the logs",
                                   diagnose::FaultCategoryName(diagnosis.category))
                     : fmt::format("Category <b>{}</b>: {}",
                                   diagnose::FaultCategoryName(diagnosis.category),
                                   E(cause::CauseSentence(diagnosis.causes.front().hypothesis)));
      break;
    case diagnose::RunVerdict::kFailed:
      status = "FAILED";
      headline =
          fmt::format("Category <b>{}</b>: {}", diagnose::FaultCategoryName(diagnosis.category),
                      E(diagnose::FailureHeadline(diagnosis)));
      break;
    case diagnose::RunVerdict::kUndetermined:
      status_class = "undetermined";
      status = "UNDETERMINED";
      headline = E(diagnose::Capitalized(diagnose::VerdictWithoutCause(diagnosis)));
      break;
    case diagnose::RunVerdict::kHealthy:
      status_class = "normal";
      status = "HEALTHY";
      headline = E(diagnose::Capitalized(diagnose::VerdictWithoutCause(diagnosis)));
      break;
  }
  return fmt::format("<p><span class=\"badge {}\" id=\"status\">{}</span> {}</p>\n", status_class,
                     status, headline);
}

// The document head, the title and the navigation.
std::string HtmlHead(const HtmlReportOptions& options, size_t shown) {
  std::string out;
  out +=
      "<!DOCTYPE html>\n<html lang=\"en\" data-errors=\"0\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += "<meta name=\"color-scheme\" content=\"light dark\">\n";
  out +=
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n";
  out += fmt::format(
      "<title>{}</title>\n<style>{}</style>\n<script>{}{}</script>\n</head>\n<body>\n<main>\n",
      E(options.title), kCss, kScript, options.perfetto_path.empty() ? "" : kPerfettoScript);
  out += fmt::format("<h1>{}</h1>\n", E(options.title));
  if (!options.source.empty()) {
    out += fmt::format("<p class=\"muted mono\">{}</p>\n", E(options.source));
  }
  out +=
      "<nav><a href=\"#summary\">Summary</a><a href=\"#explanation\">Explanation</a><a "
      "href=\"#abnormal\">Abnormal steps</a>";
  for (size_t i = 0; i < shown; ++i)
    out += fmt::format("<a href=\"#finding-{}\">Finding {}</a>", i + 1, i + 1);
  out +=
      "<a href=\"#logs\">Logs</a><a href=\"#evidence\">Evidence</a><a "
      "href=\"#collection\">Collection</a></nav>\n";
  return out;
}

std::string SummarySection(const NodeView& view, const Diagnosis& diagnosis) {
  std::string example;  // the top suspect operator, under the facts
  std::string out;
  out += "<section id=\"summary\">\n<h2>Incident summary</h2>\n";
  out += StatusParagraph(diagnosis);
  if (const std::string model = ModelOpinionText(diagnosis.model); !model.empty()) {
    out += fmt::format("<p id=\"model-verdict\"><b>Learned model:</b> {}</p>\n",
                       E(model + ModelAgreementText(diagnosis)));
  }
  if (const std::string said = ModelExplanationText(diagnosis); !said.empty()) {
    out += fmt::format("<p id=\"model-explanation\"><b>The model explains:</b> {}</p>\n", E(said));
  }
  out += "<div class=\"facts\">\n";
  if (!diagnosis.causes.empty()) {
    const cause::Hypothesis& h = diagnosis.causes.front().hypothesis;
    out += Fact("Cause", fmt::format("<strong>{}</strong> ({})", E(cause::CauseLocation(h)),
                                     cause::CauseKindName(h.kind)));
    out += Fact("Window", fmt::format("{}, since {}", cause::CauseSteps(h),
                                      base::FormatUtcClock(h.since_ns)));
    if (h.step_baseline_ns > 0.0) {
      out +=
          Fact("Cost", fmt::format("{:.0f}% of a step", 100.0 * h.impact_ns / h.step_baseline_ns));
    }
    for (const bool victims : {false, true}) {
      const std::string list = diagnose::CauseOperatorsText(diagnosis.causes.front(), victims);
      if (!list.empty()) {
        out += Fact(victims ? "Waited" : "Slowed", fmt::format("<span class=\"mono\">{}</span>",
                                                                E(list)));
      }
    }
  }
  if (diagnose::DecidedByLearned(diagnosis)) {
    out +=
        Fact("Decider", fmt::format("top candidate p {:.2f}, the cause from p {:.2f}",
                                    diagnosis.degraded_probability, diagnosis.decider_threshold));
  }
  if (!diagnosis.findings.empty()) {
    const Finding& top = diagnosis.findings.front();
    // One voice: a deviation outside the verdict's cause is not called a suspect.
    const bool suspect = top.supports_cause;
    if (!top.suspects.empty()) {
      example = fmt::format(
          "<p class=\"example\">{} operator: <span class=\"mono\">{}</span> ({})</p>\n",
          suspect ? "Top suspect" : "Largest deviating", E(view.Name(top.suspects.front())),
          base::FormatDuration(view.Dur(top.suspects.front())));
    }
    out +=
        Fact(suspect ? "Top suspect" : "Largest deviation",
             fmt::format("rank {}, step {}, <strong>{}</strong>{}", top.rank, top.step_number,
                         localize::OperatorFamilyName(top.family),
                         suspect                    ? ""
                         : diagnosis.causes.empty() ? " (below this run's noise: not a cause)"
                                                    : " (outside the cause's steps and place)"));
    out += Fact("Evidence",
                fmt::format("{} {} vs normal {}{}, z {:.1f}", localize::FeatureName(top.feature),
                            diagnose::FeatureValueText(top.feature, top.value),
                            top.against_peers ? "(peers) " : "",
                            diagnose::FeatureValueText(top.feature, top.median), top.peak_z));
  }
  if (diagnosis.degraded) {
    out += Fact("First abnormal step", base::FormatUtcClock(diagnosis.first_abnormal_ns));
  }
  const size_t steps = diagnose::ListedOf(diagnosis, diagnosis.steps, diagnosis.steps.size());
  std::set<int32_t> abnormal_ranks;
  for (size_t i = 0; i < steps; ++i) abnormal_ranks.insert(diagnosis.steps[i].rank);
  std::string rank_list;
  for (int32_t rank : abnormal_ranks)
    rank_list += (rank_list.empty() ? "" : ", ") + std::to_string(rank);
  const bool cause_only = diagnose::ShowsCauseSupportOnly(diagnosis);
  const auto elsewhere = [&](size_t listed, size_t all) {
    return cause_only ? fmt::format(" in the cause's window, {} elsewhere", all - listed) : "";
  };
  // With a cause, what these count: steps whose findings passed their own threshold (the
  // cause's window is its own fact above).
  out += Fact(cause_only ? "Steps past the findings' threshold" : "Abnormal steps",
              fmt::format("{}{}{}", steps, rank_list.empty() ? "" : " on rank(s) " + rank_list,
                          elsewhere(steps, diagnosis.steps.size())));
  const size_t requests =
      diagnose::ListedOf(diagnosis, diagnosis.requests, diagnosis.requests.size());
  out += Fact(cause_only ? "Requests in those steps" : "Abnormal requests",
              fmt::format("{}{}", requests, elsewhere(requests, diagnosis.requests.size())));
  out += "</div>\n" + example + "</section>\n";
  return out;
}

std::string ExplanationSection(const model::Trace& trace, const Diagnosis& diagnosis,
                               const HtmlReportOptions& options) {
  std::string out;
  out += "<section id=\"explanation\">\n<h2>Explanation and next action</h2>\n";
  out +=
      fmt::format("<div class=\"callout\" id=\"explanation-text\"><b>Explanation.</b> {}</div>\n",
                  E(diagnose::Explanation(trace, diagnosis)));
  if (!options.narrative_status.empty()) {
    out += "<div class=\"callout\" id=\"narrative\">";
    if (!options.narrative.empty()) {
      out += fmt::format(
          "<b>Narrative (LLM).</b> <span id=\"narrative-text\" "
          "style=\"white-space:pre-line\">{}</span>",
          E(options.narrative));
    }
    out += fmt::format("<p class=\"muted\" id=\"narrative-status\">{}</p></div>\n",
                       E(options.narrative_status));
  }
  out += fmt::format("<div class=\"callout next\" id=\"next-action\"><b>Next.</b> {}</div>\n",
                     E(diagnose::NextActionOf(diagnosis)));
  out += "</section>\n";
  return out;
}

// The abnormal steps table; with a Perfetto export, each row carries its window.
// "N more <what> not listed", saying with a cause that those outside `where` are among them;
// "" when none is left out.
std::string NotListedLine(const Diagnosis& diagnosis, size_t left_out, std::string_view what,
                          std::string_view where) {
  if (left_out == 0) return "";
  return fmt::format("<p class=\"cut\">{} more {} not listed{}.</p>\n", left_out, what,
                     diagnose::ShowsCauseSupportOnly(diagnosis)
                         ? fmt::format(" (those outside {} among them)", where)
                         : "");
}

std::string AbnormalStepsTable(const model::Trace& trace, const Diagnosis& diagnosis,
                               const HtmlReportOptions& options) {
  const bool handoff = !options.perfetto_path.empty();
  std::string out;
  out += "<h3>Abnormal steps</h3>\n";
  if (handoff) {
    out += fmt::format(
        "<div class=\"handoff\" id=\"perfetto-handoff\" data-perfetto-file=\"{0}\">\n<p>"
        "Perfetto export of this trace: <span class=\"mono\">{0}</span>. Each step's window is "
        "in trace-relative microseconds as the export writes them (its <i>teller diagnosis / "
        "abnormal steps</i> track has one slice per window; suspects are coloured and carry "
        "<span class=\"mono\">teller_suspect</span> args).</p>\n<p>The buttons need the "
        "network: they open <b>ui.perfetto.dev</b> in a new tab and post the export to it "
        "(the trace stays in the browser). Pick the export file once: <input type=\"file\" "
        "id=\"perfetto-file\" accept=\".json,application/json\"></p>\n<p class=\"muted\" "
        "id=\"perfetto-status\"></p>\n</div>\n",
        E(options.perfetto_path));
  }
  out +=
      "<div class=\"scroll\"><table><tr><th class=\"num\">rank</th>"
      "<th class=\"num\">step</th><th>phase</th><th>family</th><th class=\"num\">z</th>"
      "<th>start</th><th class=\"num\">duration</th>";
  out += handoff ? "<th>Perfetto window (&micro;s)</th><th></th></tr>\n" : "</tr>\n";
  const int64_t origin_ns = handoff ? PerfettoOriginNs(trace) : 0;
  const size_t listed = diagnose::ListedOf(diagnosis, diagnosis.steps, kMaxStepRows);
  for (size_t i = 0; i < listed; ++i) {
    const diagnose::AbnormalStep& s = diagnosis.steps[i];
    const size_t row = s.step.value();
    out += fmt::format(
        "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td>"
        "<td class=\"num\">{:.1f}</td><td class=\"mono\">{}</td><td class=\"num\">{}</td>",
        s.rank, s.number, model::StepPhaseName(trace.steps.phase[row]),
        localize::OperatorFamilyName(s.family), s.score,
        base::FormatUtcClock(trace.steps.start_ns[row]),
        base::FormatDuration(trace.steps.end_ns[row] - trace.steps.start_ns[row]));
    if (handoff) {
      const PerfettoWindow window = PerfettoStepWindow(trace, s.step, origin_ns);
      const std::string start_us = FormatPerfettoMicros(window.start_ns);
      const std::string end_us = FormatPerfettoMicros(window.end_ns);
      out += fmt::format(
          "<td class=\"mono perfetto-window\" data-step=\"{}\" data-rank=\"{}\" "
          "data-start-us=\"{}\" data-end-us=\"{}\">{} &ndash; {}</td><td><button "
          "type=\"button\" class=\"perfetto-open\" data-start-ns=\"{}\" data-end-ns=\"{}\" "
          "title=\"opens ui.perfetto.dev (needs the network) with the export at this "
          "window\">Open in ui.perfetto.dev (online)</button></td>",
          s.number, s.rank, start_us, end_us, start_us, end_us, window.start_ns, window.end_ns);
    }
    out += "</tr>\n";
  }
  out += "</table></div>\n";
  out += NotListedLine(diagnosis, diagnosis.steps.size() - listed, "abnormal steps",
                       "the cause's ranks and steps");
  return out;
}

std::string AbnormalRequestsTable(const model::Trace& trace, const Diagnosis& diagnosis,
                                  const HtmlReportOptions& options) {
  std::string out;
  out +=
      "<h3>Abnormal requests</h3>\n<div class=\"scroll\"><table><tr><th>request</th>"
      "<th class=\"num\">z</th><th>abnormal steps</th></tr>\n";
  const size_t listed = diagnose::ListedOf(diagnosis, diagnosis.requests, options.max_requests);
  for (size_t i = 0; i < listed; ++i) {
    const diagnose::AbnormalRequest& r = diagnosis.requests[i];
    std::string steps;
    for (size_t k = 0; k < r.steps.size() && k < 12; ++k)
      steps += (k ? ", " : "") + std::to_string(r.steps[k]);
    if (r.steps.size() > 12) steps += ", ...";
    out +=
        fmt::format("<tr><td class=\"mono\">{}</td><td class=\"num\">{:.1f}</td><td>{}</td></tr>\n",
                    E(trace.str(trace.requests.id[r.request.value()])), r.score, steps);
  }
  out += "</table></div>\n";
  out += NotListedLine(diagnosis, diagnosis.requests.size() - listed, "abnormal requests",
                       "the cause's steps");
  return out;
}

std::string VotesTable(const Diagnosis& diagnosis) {
  std::string out;
  out +=
      "<h3>Category votes</h3>\n<div class=\"scroll\"><table><tr><th>category</th>"
      "<th class=\"num\">weight</th><th>reason</th></tr>\n";
  for (const diagnose::CategoryVote& vote : diagnosis.votes) {
    out += fmt::format("<tr><td>{}</td><td class=\"num\">{:.2f}</td><td>{}</td></tr>\n",
                       diagnose::FaultCategoryName(vote.category), vote.weight, E(vote.reason));
  }
  out += "</table></div>\n";
  return out;
}

std::string AbnormalSection(const model::Trace& trace, const Diagnosis& diagnosis,
                            const HtmlReportOptions& options) {
  std::string out = fmt::format(
      "<section id=\"abnormal\">\n<h2>Abnormal steps and requests{}</h2>\n",
      diagnosis.degraded || diagnosis.failed ? ""
                                             : " (none stands above this run's noise as a cause)");
  if (diagnosis.steps.empty() && diagnosis.requests.empty()) {
    out += "<p class=\"muted\">None.</p>\n";
  }
  if (!diagnosis.steps.empty()) out += AbnormalStepsTable(trace, diagnosis, options);
  if (!diagnosis.requests.empty()) out += AbnormalRequestsTable(trace, diagnosis, options);
  if (!diagnosis.votes.empty()) out += VotesTable(diagnosis);
  out += "</section>\n";
  return out;
}

// Finding number i + 1: timeline and call-chain tree of its slice.
std::string FindingSection(const NodeView& view, const Finding& finding, size_t i,
                           const DrawnSet& set, const std::vector<NodeIndex>& tree_nodes,
                           const NameMedians& medians) {
  const model::Trace& trace = view.trace;
  std::string out;
  std::unordered_set<uint32_t> suspects;
  for (NodeIndex node : finding.suspects) suspects.insert(node.value());
  out += fmt::format("<section id=\"finding-{}\" class=\"finding\">\n", i + 1);
  out += fmt::format(
      "<h2>Finding {}: rank {}, step {} ({}), {}</h2>\n<p>{} {} vs normal {}{} (z {:.1f}, score "
      "{:.1f}){}</p>\n",
      i + 1, finding.rank, finding.step_number,
      model::StepPhaseName(trace.steps.phase[finding.step.value()]),
      localize::OperatorFamilyName(finding.family), localize::FeatureName(finding.feature),
      diagnose::FeatureValueText(finding.feature, finding.value),
      finding.against_peers ? "(peer ranks) " : "",
      diagnose::FeatureValueText(finding.feature, finding.median), finding.peak_z, finding.score,
      finding.persistent ? "; abnormal in nearly every step of the rank (discounted)" : "");
  if (!finding.also_steps.empty()) {
    std::string steps;
    for (size_t k = 0; k < finding.also_steps.size() && k < 16; ++k) {
      steps += (k ? ", " : "") + std::to_string(finding.also_steps[k]);
    }
    if (finding.also_steps.size() > 16) steps += ", ...";
    out += fmt::format("<p class=\"muted\">Also abnormal in steps {}.</p>\n", steps);
  }
  if (!finding.slice.step.valid()) {
    out += "<p class=\"muted\">No slice for this finding.</p>\n</section>\n";
    return out;
  }
  out += fmt::format(
      "<h3>Timeline of the causal-context slice</h3>\n<p class=\"muted\">{} of the step's {} "
      "nodes kept in the slice{}; one lane per layer{}; calls that "
      "enclose the rest are clipped to it. Hover a bar for its name and duration.</p>\n",
      finding.slice.nodes.size(), finding.slice.step_nodes,
      finding.slice.peer_nodes.empty() ? ""
                                       : fmt::format(", plus {} matching collectives on peer ranks",
                                                     finding.slice.peer_nodes.size()),
      set.peers.empty() ? "" : " and rank");
  const size_t drawn_count = set.own.size() + set.peers.size();
  if (drawn_count < set.total) {
    out += fmt::format(
        "<p class=\"cut\">Drew {} of {} slice nodes: the suspects and the most relevant; {} "
        "less relevant nodes cut.</p>\n",
        drawn_count, set.total, set.total - drawn_count);
  }
  std::vector<NodeIndex> all = set.own;
  all.insert(all.end(), set.peers.begin(), set.peers.end());
  out += Legend(all, view);
  out += "<div class=\"scroll\">" + Timeline(view, finding, set, suspects) + "</div>\n";
  out +=
      "<h3>Call-chain tree</h3>\n<p class=\"muted\">Slice nodes nested under their nearest "
      "kept caller; normal = median duration of the same operator over the run.</p>\n";
  const size_t tree_total = finding.slice.nodes.size();
  if (tree_nodes.size() < tree_total) {
    out += fmt::format(
        "<p class=\"cut\">Listed {} of {} slice nodes (suspects and the most "
        "relevant).</p>\n",
        tree_nodes.size(), tree_total);
  }
  out += Tree(view, tree_nodes, suspects, medians);
  if (!set.peers.empty()) {
    out += "<h3>Matching collectives on peer ranks</h3>\n<ul class=\"tree\">\n";
    for (NodeIndex node : set.peers) {
      out += fmt::format(
          "<li><span class=\"node\" data-node=\"{}\"><span class=\"layer\">rank {}</span> "
          "<span class=\"mono\">{}</span> <b>{}</b></span></li>\n",
          node.value(), view.Rank(node), E(view.Name(node)), base::FormatDuration(view.Dur(node)));
    }
    out += "</ul>\n";
  }
  out += "</section>\n";
  return out;
}

// The evidence lines, then other lines aligned to the drawn findings' steps.
std::string LogsSection(const model::Trace& trace, const Diagnosis& diagnosis, size_t shown,
                        const HtmlReportOptions& options) {
  std::string out;
  out += "<section id=\"logs\">\n<h2>Aligned log lines</h2>\n";
  std::set<size_t> listed;
  std::string rows;
  for (const diagnose::LogEvidence& log : diagnosis.logs) {
    if (listed.size() >= options.max_log_lines || log.row >= trace.logs.size()) break;
    listed.insert(log.row);
    rows += LogRow(trace, log.row, log.Label(), diagnose::FaultCategoryName(log.category));
  }
  std::unordered_set<uint32_t> finding_steps;
  for (size_t i = 0; i < shown; ++i) finding_steps.insert(diagnosis.findings[i].step.value());
  size_t aligned_more = 0;
  for (size_t row = 0; row < trace.logs.size(); ++row) {
    const model::StepIndex step = trace.logs.step[row];
    if (!step.valid() || !finding_steps.count(step.value()) || listed.count(row)) continue;
    if (listed.size() >= options.max_log_lines) {
      ++aligned_more;
      continue;
    }
    listed.insert(row);
    rows += LogRow(trace, row, "", "");
  }
  if (rows.empty()) {
    out += fmt::format(
        "<p class=\"muted\">No log line matched a rule or aligned to the findings' "
        "steps ({} log lines in the trace).</p>\n",
        trace.logs.size());
  } else {
    out +=
        "<p class=\"muted\">Lines that matched a category rule first, then lines aligned to the "
        "findings' steps.</p>\n<div class=\"scroll\"><table><tr><th>time</th><th "
        "class=\"num\">rank</th>"
        "<th>level</th><th class=\"num\">step</th><th>source:line</th><th>rule</th><th>text</th>"
        "<th>template</th></tr>\n" +
        rows + "</table></div>\n";
    if (aligned_more > 0) {
      out += fmt::format("<p class=\"cut\">{} more aligned lines not listed.</p>\n", aligned_more);
    }
  }
  out += "</section>\n";
  return out;
}

std::string EvidenceSection(const NodeView& view, const Diagnosis& diagnosis,
                            const HtmlReportOptions& options) {
  std::string out;
  out += "<section id=\"evidence\">\n<h2>Evidence</h2>\n";
  if (diagnosis.findings.empty()) {
    out += "<p class=\"muted\">No finding.</p>\n";
  } else {
    if (!diagnosis.degraded) {
      out += "<p class=\"muted\">None of these stands above this run's noise as a cause.</p>\n";
    }
    out +=
        "<div class=\"scroll\"><table><tr><th class=\"num\">#</th><th class=\"num\">rank</th>"
        "<th class=\"num\">step</th><th>family</th><th>feature</th><th class=\"num\">value</th>"
        "<th class=\"num\">normal</th><th class=\"num\">z</th><th class=\"num\">score</th>"
        "<th>example suspect</th><th class=\"num\">slice</th></tr>\n";
    const size_t listed =
        diagnose::ListedOf(diagnosis, diagnosis.findings, options.max_table_findings);
    for (size_t i = 0; i < listed; ++i) {
      const Finding& f = diagnosis.findings[i];
      out += fmt::format(
          "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td "
          "class=\"num\">{}</td><td>{}</td>"
          "<td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}{}</td><td "
          "class=\"num\">{:.1f}</td>"
          "<td class=\"num\">{:.1f}</td><td class=\"mono\">{}</td><td class=\"num\">{}</td></tr>\n",
          i + 1, f.rank, f.step_number, localize::OperatorFamilyName(f.family),
          localize::FeatureName(f.feature), diagnose::FeatureValueText(f.feature, f.value),
          f.against_peers ? "~" : "", diagnose::FeatureValueText(f.feature, f.median), f.peak_z,
          f.score, f.suspects.empty() ? "" : E(view.Name(f.suspects.front())),
          f.slice.step.valid() ? fmt::format("{}/{}", f.slice.nodes.size(), f.slice.step_nodes)
                               : "-");
    }
    out +=
        "</table></div>\n<p class=\"muted\">normal: median of comparable steps of the run (~: of "
        "the peer ranks in the same step); z: worst step; score: mean of the top step z's.</p>\n";
    if (const std::string elsewhere = diagnose::LargestElsewhereText(diagnosis); !elsewhere.empty()) {
      out += fmt::format(
          "<p class=\"muted\">Listed: the deviations on the cause's ranks and steps; {}, not "
          "the cause's (JSON <code>findings</code>).</p>\n",
          E(elsewhere));
    }
  }
  out += "</section>\n";
  return out;
}

std::string CountersTable(const model::Trace& trace) {
  std::string out;
  std::string counters;
  size_t counter_count = 0;
  for (const auto& [name, entry] : trace.stats.entries()) {
    if (entry.severity == model::StatSeverity::kInfo || entry.value == 0) continue;
    if (++counter_count > 40) continue;
    counters +=
        fmt::format("<tr><td class=\"mono\">{}</td><td>{}</td><td class=\"num\">{}</td></tr>\n",
                    E(name), model::StatSeverityName(entry.severity), entry.value);
  }
  if (counter_count > 0) {
    out +=
        "<h3>Error and data-loss counters</h3>\n<div class=\"scroll\"><table><tr><th>counter</th>"
        "<th>severity</th><th class=\"num\">value</th></tr>\n" +
        counters + "</table></div>\n";
    if (counter_count > 40)
      out += fmt::format("<p class=\"cut\">{} more counters.</p>\n", counter_count - 40);
  } else {
    out += "<p class=\"muted\">No error or data-loss counter is set.</p>\n";
  }
  return out;
}

std::string SourcesList(const model::Trace& trace) {
  std::string out;
  if (!trace.meta.sources.empty()) {
    out += "<h3>Sources</h3>\n<ul class=\"mono\">\n";
    for (size_t i = 0; i < trace.meta.sources.size() && i < 12; ++i) {
      out += "<li>" + E(trace.meta.sources[i]) + "</li>\n";
    }
    if (trace.meta.sources.size() > 12) {
      out += fmt::format("<li>... {} more</li>\n", trace.meta.sources.size() - 12);
    }
    out += "</ul>\n";
  }
  return out;
}

std::string CollectionSection(const model::Trace& trace, const Diagnosis& diagnosis) {
  std::set<int32_t> ranks(trace.steps.rank.begin(), trace.steps.rank.end());
  std::string out;
  out += "<section id=\"collection\">\n<h2>Collection facts</h2>\n<div class=\"facts\">\n";
  std::array<int64_t, model::kLayerCount> layer_counts{};
  for (model::Layer layer : trace.events.layer) ++layer_counts[static_cast<int>(layer)];
  std::string present, missing;
  for (int l = 0; l < model::kLayerCount; ++l) {
    const auto layer = static_cast<model::Layer>(l);
    if (layer_counts[l] > 0) {
      present += fmt::format("{}{} {}", present.empty() ? "" : ", ", model::LayerName(layer),
                             layer_counts[l]);
    } else if (layer != model::Layer::kDrv && layer != model::Layer::kOther) {
      missing += fmt::format("{}{}", missing.empty() ? "" : ", ", model::LayerName(layer));
    }
  }
  out += Fact("Events",
              fmt::format("{} ({} call-chain nodes)", trace.events.size(), trace.nodes.size()));
  out += Fact("Steps", fmt::format("{} ({}) on {} rank(s)", trace.steps.size(),
                                   trace.steps.size() ? model::StepSourceName(trace.steps.source[0])
                                                      : "none",
                                   ranks.size()));
  out += Fact("Scored", fmt::format("{} steps, {} baseline keys", diagnosis.steps_scored,
                                    diagnosis.baseline_keys));
  out += Fact("Log lines",
              fmt::format("{} ({} templates)", trace.logs.size(), trace.templates.size()));
  out += Fact("Layers present", present.empty() ? "none" : present);
  out += Fact("Layers absent", missing.empty() ? "none" : missing);
  out += "</div>\n";
  if (!diagnosis.notes.empty() || !trace.meta.notes.empty()) {
    out += "<h3>What the diagnosis could not see</h3>\n<ul>\n";
    for (const std::string& note : diagnosis.notes) out += "<li>" + E(note) + "</li>\n";
    for (const std::string& note : trace.meta.notes) out += "<li>" + E(note) + "</li>\n";
    out += "</ul>\n";
  }
  out += CountersTable(trace);
  out += SourcesList(trace);
  out += "</section>\n";
  return out;
}

}  // namespace

std::string RenderDiagnosisHtml(const model::Trace& trace, const Diagnosis& diagnosis,
                                const HtmlReportOptions& options) {
  const NodeView view{trace};
  const size_t shown = diagnose::ListedOf(diagnosis, diagnosis.findings, options.max_findings);

  // Selections first: the medians need every drawn node.
  std::vector<DrawnSet> drawn(shown);
  std::vector<std::vector<NodeIndex>> tree_nodes(shown);
  NameMedians medians;
  for (size_t i = 0; i < shown; ++i) {
    const Finding& finding = diagnosis.findings[i];
    if (!finding.slice.step.valid()) continue;
    drawn[i] = SelectNodes(finding, options.max_slice_nodes);
    tree_nodes[i] = SelectNodes(finding, options.max_tree_nodes).own;
    for (NodeIndex node : tree_nodes[i]) medians.Want(view, node);
  }
  medians.Compute(view);

  std::string out = HtmlHead(options, shown);
  out += SummarySection(view, diagnosis);
  out += ExplanationSection(trace, diagnosis, options);
  out += AbnormalSection(trace, diagnosis, options);
  for (size_t i = 0; i < shown; ++i) {
    out += FindingSection(view, diagnosis.findings[i], i, drawn[i], tree_nodes[i], medians);
  }
  out += LogsSection(trace, diagnosis, shown, options);
  out += EvidenceSection(view, diagnosis, options);
  out += CollectionSection(trace, diagnosis);
  out += "<p class=\"muted\">Written by teller diagnose. Self-contained: no network access.</p>\n";
  out += "</main>\n</body>\n</html>\n";
  return out;
}

}  // namespace teller::report
