import { useEffect, useState } from 'react';
import { ReactFlowProvider } from '@xyflow/react';
import { createApi, forgetToken, isTauri, storeToken, takeToken, type Api } from '../api';
import { useEditor } from '../store/editor';
import { Canvas } from '../canvas/Canvas';
import { Palette } from '../palette/Palette';
import { Inspector } from '../inspector/Inspector';
import { BottomPanel } from '../panels/BottomPanel';
import { TopBar } from './TopBar';
import { WorkflowList } from './WorkflowList';
import { Shell } from './Shell';
import { useNav } from './nav';
import { TokenScreen } from './TokenScreen';
import { TabList, tabPanelProps } from './Tabs';
import { useAutoValidate, useBeforeUnload, useShortcuts } from './Shortcuts';

function LeftPanel() {
  const tab = useEditor((s) => s.leftTab);
  const setTab = useEditor((s) => s.setLeftTab);
  const count = useEditor((s) => s.workflows.length);
  return (
    <aside className="fx-left" id="fx-left-panel" aria-label="Steps and workflows" data-testid="left-panel">
      <div className="fx-tabs">
        <TabList
          base="fx-left"
          label="Steps or workflows"
          value={tab}
          onSelect={setTab}
          tabs={[
            { id: 'steps', testId: 'tab-steps', label: 'Steps' },
            {
              id: 'workflows',
              testId: 'tab-workflows',
              label: (
                <>
                  Workflows <span className="fx-count">{count}</span>
                </>
              ),
            },
          ]}
        />
      </div>
      <div className="fx-left-body" {...tabPanelProps('fx-left', tab)}>
        {tab === 'steps' ? <Palette /> : <WorkflowList />}
      </div>
    </aside>
  );
}

function Editor() {
  useShortcuts();
  useAutoValidate();
  useBeforeUnload();
  const leftOpen = useEditor((s) => s.leftOpen);
  const rightOpen = useEditor((s) => s.rightOpen);
  return (
    <div className="fx-app" data-testid="editor">
      <TopBar />
      <div className={`fx-main ${leftOpen ? '' : 'no-left'} ${rightOpen ? '' : 'no-right'}`}>
        {leftOpen && <LeftPanel />}
        <div className="fx-center">
          <Canvas />
          <BottomPanel />
        </div>
        {rightOpen && <Inspector />}
      </div>
    </div>
  );
}

export function App() {
  const [api, setApi] = useState<Api | null>(() => createApi(takeToken()));
  const [authError, setAuthError] = useState<string | undefined>();
  const ready = useEditor((s) => s.ready);
  const loadError = useEditor((s) => s.loadError);
  const view = useNav((s) => s.view);
  const connected = useEditor((s) => s.api !== null);

  // A link with `#token=…` opened in this tab (no reload): take the token, clean the URL.
  useEffect(() => {
    const onHash = () => {
      if (!/token=/.test(window.location.hash)) return;
      const t = takeToken();
      if (t && !isTauri()) setApi(createApi(t));
    };
    window.addEventListener('hashchange', onHash);
    return () => window.removeEventListener('hashchange', onHash);
  }, []);

  useEffect(() => {
    if (!api) return;
    useEditor
      .getState()
      .init(api)
      .catch((e: { code?: string; message: string }) => {
        if (e.code === 'unauthorized' && !isTauri()) {
          forgetToken();
          setAuthError(e.message);
          setApi(null);
        }
      });
  }, [api]);

  if (!api) {
    return (
      <TokenScreen
        reason={authError}
        onToken={(t) => {
          storeToken(t);
          setAuthError(undefined);
          setApi(createApi(t));
        }}
      />
    );
  }
  // Runs, Memory and Settings need only the connection, not the editor's catalog and workflow.
  if (!ready && (loadError || view === 'editor' || !connected)) {
    return (
      <div className="fx-loading" data-testid="loading">
        {loadError ? (
          <>
            <p>Cannot load the editor: {loadError}</p>
            <button className="fx-btn" onClick={() => setApi(createApi(takeToken()))}>
              Retry
            </button>
          </>
        ) : (
          'Loading Fluxo…'
        )}
      </div>
    );
  }
  return (
    <ReactFlowProvider>
      <Shell editor={<Editor />} />
    </ReactFlowProvider>
  );
}
