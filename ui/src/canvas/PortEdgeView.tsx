import { memo } from 'react';
import { getBezierPath, type EdgeProps } from '@xyflow/react';
import { useEditor } from '../store/editor';
import type { PortEdge } from '../store/graph';

/** An edge out of a named port: `error` edges dashed red; edges the last run walked lit up. */
function PortEdgeViewImpl(props: EdgeProps<PortEdge>) {
  const { id, source, sourceX, sourceY, targetX, targetY, sourcePosition, targetPosition, selected, data } = props;
  const port = data?.port ?? 'out';
  const taken = useEditor((s) => !!s.runByStep[source]?.ports?.includes(port));
  const runShown = useEditor((s) => s.run !== null);
  const mark = useEditor((s) => s.problemEdges[id]);
  const [path] = getBezierPath({ sourceX, sourceY, targetX, targetY, sourcePosition, targetPosition });
  const cls = [
    'fx-edge',
    port === 'error' ? 'fx-edge-error' : '',
    runShown ? (taken ? 'fx-edge-taken' : 'fx-edge-idle') : '',
    selected ? 'is-selected' : '',
    mark ? `fx-edge-${mark}` : '',
  ].join(' ');
  return (
    <>
      <path d={path} className="react-flow__edge-interaction" fill="none" strokeOpacity={0} strokeWidth={18} />
      <path
        d={path}
        className={cls}
        fill="none"
        data-testid={`edge-${id}`}
        data-port={port}
        data-taken={runShown ? String(taken) : undefined}
      />
    </>
  );
}

export const PortEdgeView = memo(PortEdgeViewImpl);
