// The editor's icons: lucide (one consistent stroke icon set) instead of Unicode glyphs.
import { ArrowLeftRight, Database, GitFork, Shapes, TriangleAlert, Zap, type LucideIcon } from 'lucide-react';

export const CATEGORY_ICON: Record<string, LucideIcon> = {
  trigger: Zap,
  data: Database,
  flow: GitFork,
  network: ArrowLeftRight,
  errors: TriangleAlert,
};

/** The icon of a step category, in its coloured square. */
export function CategoryIcon({ category }: { category: string }) {
  const Icon = CATEGORY_ICON[category] ?? Shapes;
  return (
    <span className="fx-node-icon" aria-hidden>
      <Icon size={14} strokeWidth={2.2} />
    </span>
  );
}
