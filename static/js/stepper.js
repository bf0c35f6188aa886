// The stepper page: the run form with live validation, the run's stream, the
// step controls and the views of the current step. This module builds the
// views and starts the page; each part is a module of its own:
// stepper_page.js (what the parts share), stepper_form.js, stepper_run.js,
// stepper_playback.js, stepper_panels.js and stepper_rows.js (drawing a
// step), source_view.js (the kernel's source) and projector.js (layouts).
import { Heatmap } from './heatmap.js';
import { TileGrid } from './tilegrid.js';
import { Timeline } from './timeline.js';
import { RoleLanes } from './role_lanes.js';
import { reportSize, waitsToBeWanted, whenWanted } from './embed.js';
import { $, digits, heldRoles, know, page, setStatus, state, views } from './stepper_page.js';
import { go, jumpToTile, pause } from './stepper_playback.js';
import { begin } from './stepper_run.js';
import { setProjector } from './projector.js';

Object.assign(views, {
  grid: new TileGrid($('grid'), $('grid-legend'), (i, j) => jumpToTile(i, j), know),
  s: new Heatmap($('s-tile'), { fit: true, labels: true, digits }),
  p: new Heatmap($('p-tile'), { fit: true, labels: true, digits }),
  o: new Heatmap($('o-tile'), { fit: true, labels: true, digits }),
  final: new Heatmap($('o-final'), { maxWidth: 520, maxHeight: 320, labels: true }),
  timeline: new Timeline($('timeline'), $('timeline-note'), (k) => { pause(); go(k); }),
  roles: new RoleLanes($('roles'), $('roles-note'), $('roles-legend'), $('roles-title'), (k) => { pause(); go(k); },
    (bh, q, step) => heldRoles.has(`${bh}.${q}.${step}`)),
});

// ---- start ----

{
  const asked = new URLSearchParams(location.search).get('layout');
  let saved = null;
  try { saved = localStorage.getItem('flashstep.projector'); } catch { /* private mode */ }
  if (asked === 'projector' || (asked === null && saved === '1' && !page.embed)) setProjector(true);
}
state.urlNote = page.step_error ? ` The link's ${page.step_error}.` : '';
// Framed in a lesson, the run waits until its frame comes into view.
if (page.valid) {
  if (waitsToBeWanted()) setStatus('This run starts when the lesson reaches it.');
  whenWanted().then(() => { state.waiting = false; if (!state.run && !state.model) begin(page.query, Math.max(0, page.step - 1)); });
}
else if (page.step_error) setStatus(page.step_error, true);

if (page.embed) reportSize();
